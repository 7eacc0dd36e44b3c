"""The compile cache: one entry per compiled source and options, built in
a temporary directory and renamed into place, checked before use.

An entry lives at `<cache>/<key>/<toolchain>/`, where `key` hashes the
source text and every option, and `toolchain` hashes the tools: other tools
compile a new entry. Where no tools exist (a machine that only runs
kernels), the newest entry for `key` that is intact is used. Entries are
built in a temporary directory and renamed into place, so processes
compiling the same source at once never see a half-written entry; `done`,
written last, records the size and sha256 of every other file.

Before an entry is used, its files are checked against `done` (once per
process): a truncated kernels.so would kill the process with SIGBUS when
loaded, a damaged JSON file fail on every run. A damaged entry is rebuilt
where the tools are (with a warning naming the file); elsewhere it raises
CacheError, naming the file and what to do.
"""

import hashlib
import json
import os
import pathlib
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from typing import Callable, Dict, Optional, Tuple

from . import _tools
from ._tools import CompileError

# Bumped when an entry's layout changes; part of every key, so entries of
# another format are never read. 2: `done` records the entry's files; 3:
# manifests of version 10 (buffer bindings); 4: manifests of version 11
# (each target's kernels in its section); 5: manifests of version 12 (the
# options that chose each kernel).
CACHE_FORMAT = 5
_RECORD_FORMAT = "flexsn-cache-entry"


class CacheError(CompileError):
    """A cache entry is damaged (a file missing, truncated or altered) and
    cannot be rebuilt here; the message names the file and what to do."""


def cache_dir() -> pathlib.Path:
    """$FLEXSN_CACHE_DIR, else $XDG_CACHE_HOME/flexsn, else ~/.cache/flexsn."""
    override = os.environ.get("FLEXSN_CACHE_DIR")
    if override:
        path = pathlib.Path(override)
        if path.exists() and not path.is_dir():
            raise CacheError(
                f"FLEXSN_CACHE_DIR={override} is not a "
                "directory: point it at a directory (it is "
                "created when missing)"
            )
        return path
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "flexsn"


#: What each key loaded in this process: a second compile of the same
#: source and options runs no tool and reads no file.
memo: Dict[str, object] = {}
_memo_lock = threading.Lock()


def cached(
    text: str,
    options: dict,
    fill: Callable[[pathlib.Path], None],
    load: Callable[[pathlib.Path], object],
):
    """`load(entry)` of the cache entry of `text` compiled with `options`;
    where the tools are and the entry is not built yet (or damaged),
    `fill(work)` first writes its files into a fresh directory, which
    becomes the entry."""
    key = hashlib.sha256(
        json.dumps([text, options], sort_keys=True).encode()
    ).hexdigest()[:24]
    with _memo_lock:
        if key in memo:
            return memo[key]

    entry_root = cache_dir() / key
    if _tools.tools_available():
        entry = entry_root / _tools.toolchain_id(cache_dir() / "toolchains")
        if entry.exists():
            problem = damage(entry)
            if problem:
                # At the caller of flexsn.compile (via compiler._compiled).
                warnings.warn(
                    f"{_describe(entry, *problem)}: rebuilding it",
                    RuntimeWarning,
                    stacklevel=4,
                )
                _discard(entry)
        if not (entry / "done").is_file():
            _build(entry, fill)
    else:
        entry = _newest_intact(entry_root)

    loaded = load(entry)
    with _memo_lock:
        memo[key] = loaded
    return loaded


def _newest_intact(entry_root: pathlib.Path) -> pathlib.Path:
    """Without tools: the newest entry of `entry_root` whose files match
    its record."""
    entries = (
        [
            p
            for p in entry_root.iterdir()
            if p.is_dir() and not p.name.startswith(".")
        ]
        if entry_root.is_dir()
        else []
    )
    if not entries:
        raise _tools.ToolNotFoundError(
            "the FlexSN tools are not installed and the cache "
            f"({cache_dir()}) holds no compiled copy of this source with "
            "these options: compile it where the tools are, then copy "
            "the cache (set $FLEXSN_CACHE_DIR)"
        )

    def built_at(entry):
        try:
            return (entry / "done").stat().st_mtime
        except OSError:
            return float("-inf")

    damaged = []
    for entry in sorted(entries, key=built_at, reverse=True):
        problem = damage(entry)
        if problem is None:
            for line in damaged:
                warnings.warn(
                    f"{line}: using the older {entry}",
                    RuntimeWarning,
                    stacklevel=5,
                )
            return entry
        damaged.append(_describe(entry, *problem))
    raise CacheError(
        "\n".join(damaged) + "\nThe FlexSN tools are not installed here to "
        "rebuild it: delete "
        + ", ".join(str(e) for e in entries)
        + ", compile the source again where the tools are, and copy that "
        "cache here (set $FLEXSN_CACHE_DIR)"
    )


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record(work: pathlib.Path) -> dict:
    """The contents of `done`: every file of the entry, size and sha256."""
    return {
        "format": _RECORD_FORMAT,
        "files": {
            p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
            for p in sorted(work.iterdir())
            if p.name != "done"
        },
    }


def damage(entry: pathlib.Path) -> Optional[Tuple[pathlib.Path, str]]:
    """(file, what is wrong) for the first file of `entry` that does not
    match the record in its `done`; None when all do. Nothing is loaded
    before this passes: ctypes maps a truncated library and dies of SIGBUS."""
    done = entry / "done"
    try:
        if not os.access(entry, os.R_OK | os.X_OK):
            raise PermissionError(f"cannot read the directory {entry}")
        record = json.loads(done.read_text())
        files = record["files"]
        if record["format"] != _RECORD_FORMAT or not all(
            pathlib.PurePath(name).name == name
            and isinstance(f["size"], int)
            and isinstance(f["sha256"], str)
            for name, f in files.items()
        ):
            raise ValueError
    except FileNotFoundError:
        return done, "missing (the entry's record of its files)"
    except PermissionError as error:
        raise CacheError(
            f"FlexSN cache entry {entry} cannot be read ({error}): it "
            "belongs to another user or its permissions were changed; use a "
            "cache of your own (set $FLEXSN_CACHE_DIR) or fix its "
            "permissions"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return done, (
            "not a record of the entry's files (damaged, or "
            "written by another FlexSN version)"
        )
    for name, expected in files.items():
        path = entry / name
        try:
            size = path.stat().st_size
            if size != expected["size"]:
                return path, (
                    f"{size} bytes where {expected['size']} were "
                    "written (truncated or altered)"
                )
            if _sha256(path) != expected["sha256"]:
                return path, "its contents differ from what was written"
        except FileNotFoundError:
            return path, "missing"
        except OSError as error:
            return path, f"unreadable ({error.strerror or error})"
    return None


def _describe(entry: pathlib.Path, path: pathlib.Path, problem: str) -> str:
    return f"damaged FlexSN cache entry {entry}: {path}: {problem}"


def _discard(entry: pathlib.Path) -> None:
    """Moves a damaged entry aside, then deletes it. The rename is atomic:
    of processes discarding it at once, one moves it, the others find it
    gone (and all then build it; the first rename into place wins)."""
    trash = entry.parent / f".trash-{uuid.uuid4().hex}"
    try:
        os.rename(entry, trash)
    except OSError as error:
        if entry.exists():
            raise CacheError(
                f"cannot move the damaged cache entry {entry} "
                f"aside ({error}): delete it and compile "
                "again"
            ) from None
        return
    shutil.rmtree(trash, ignore_errors=True)


def damaged_file_error(
    entry: pathlib.Path, path: pathlib.Path, problem: str
) -> CacheError:
    """The error for a file of `entry` found damaged while being read."""
    return CacheError(
        f"{_describe(entry, path, problem)}: delete {entry} "
        "and compile again (where the FlexSN tools are)"
    )


def read_json(entry: pathlib.Path, name: str) -> dict:
    # Checked against the record already; this names the file all the same
    # should it change since.
    path = entry / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        problem = f"unreadable ({error})"
        raise damaged_file_error(entry, path, problem) from None


#: A build folder older than this was left by a process that died (a
#: compile takes seconds): the next build in its directory removes it.
STALE_BUILD_SECONDS = 3600


def _remove_stale_builds(directory: pathlib.Path) -> None:
    now = time.time()
    for work in directory.glob(".build-*"):
        try:
            if now - work.stat().st_mtime > STALE_BUILD_SECONDS:
                shutil.rmtree(work, ignore_errors=True)
        except OSError:
            pass


def _build(entry: pathlib.Path, fill) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(entry.parent)
    work = pathlib.Path(tempfile.mkdtemp(prefix=".build-", dir=entry.parent))
    try:
        fill(work)
        # Last: an entry is complete when `done` exists.
        (work / "done").write_text(json.dumps(_record(work), indent=1))
        try:
            os.rename(work, entry)
        except OSError:
            # Another process finished the same entry first: keep theirs.
            if not (entry / "done").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
