#!/usr/bin/env bash
# Builds the wheel: flexsn-<version>-py3-none-manylinux_2_36_x86_64.whl in
# $FLEXSN_WHEEL_DIR (default dist/), holding
#   flexsn/                      the Python package (python/flexsn);
#   flexsn/_bundled/bin/flexsn   the multi-call binary (flexsn <tool> runs
#                                flexsn-compile, -opt or -translate),
#                                linked statically against LLVM and MLIR
#                                (Debian's libmlir-22-dev archives), so that
#                                nothing needs a shared libMLIR or libLLVM;
#   flexsn/_bundled/lib/         the C runtime (libflexsn_runtime.so) and
#                                LLVM's OpenMP runtime, which CPU kernels
#                                link;
#   flexsn/_bundled/share/flexsn/neurons/   the shipped neurons;
# and the metadata of pyproject.toml (the console scripts run the bundled
# binary). `pip install .` and `pip wheel .` run this script too
# (utils/wheel_backend.py). The tools are built in their own build
# directory ($FLEXSN_WHEEL_BUILD_DIR, default build-wheel) with
# -DFLEXSN_LINK_MLIR_DYLIB=OFF; on this 2-core machine the first build
# takes about 20 minutes. The wheel needs glibc 2.36 or newer (Debian 12's,
# which builds it) and libstdc++ from GCC 12 or newer. docs/Wheel.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${FLEXSN_WHEEL_BUILD_DIR:-build-wheel}
OUT_DIR=${FLEXSN_WHEEL_DIR:-dist}
LLVM_PREFIX=/usr/lib/llvm-22
PY=/usr/bin/python3

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

log "building the statically linked tools in $BUILD_DIR"
# With ccache, the objects the development build compiled are reused.
ccache=OFF
command -v ccache >/dev/null && ccache=ON
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DFLEXSN_LINK_MLIR_DYLIB=OFF -DBUILD_TESTING=OFF \
  -DLLVM_PARALLEL_LINK_JOBS=1 -DFLEXSN_CCACHE="$ccache" \
  -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
  -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" > /dev/null
cmake --build "$BUILD_DIR" --target flexsn flexsn_runtime >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bundled="$stage/flexsn/_bundled"
mkdir -p "$bundled/bin" "$bundled/lib" "$bundled/share/flexsn/neurons"
(cd python && find flexsn -name '*.py' -o -name '*.pyi' | grep -v __pycache__ |
   while read -r f; do mkdir -p "$stage/$(dirname "$f")"; cp "$f" "$stage/$f"; done)
if ldd "$BUILD_DIR/bin/flexsn" | grep -Eq 'libMLIR|libLLVM'; then
  echo "build_wheel.sh: flexsn links a shared libMLIR or libLLVM" >&2
  exit 1
fi
strip -o "$bundled/bin/flexsn" "$BUILD_DIR/bin/flexsn"
cp "$BUILD_DIR/lib/Runtime/libflexsn_runtime.so" "$bundled/lib/"
cp -L "$LLVM_PREFIX/lib/libomp.so.5" "$bundled/lib/"
cp lib/Neurons/*.mlir "$bundled/share/flexsn/neurons/"

log "writing the wheel into $OUT_DIR"
mkdir -p "$OUT_DIR"
"$PY" - "$stage" "$OUT_DIR" "$ROOT" <<'PYEOF'
import base64, hashlib, os, pathlib, re, stat, sys, tomllib, zipfile
stage, out, root = (pathlib.Path(a) for a in sys.argv[1:4])
project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
dialect = (stage / "flexsn" / "_dialect.py").read_text()
version = re.search(r'^VERSION = "([^"]+)"', dialect, re.M).group(1)
tag = "py3-none-manylinux_2_36_x86_64"
dist_info = f"flexsn-{version}.dist-info"
files = {}
for path in sorted(stage.rglob("*")):
    if path.is_file():
        files[path.relative_to(stage).as_posix()] = path
for name in project["license-files"]:
    files[f"{dist_info}/licenses/{name}"] = root / name
metadata = [
    "Metadata-Version: 2.4", f"Name: {project['name']}",
    f"Version: {version}", f"Summary: {project['description']}",
    f"Requires-Python: {project['requires-python']}",
    f"License-Expression: {project['license']}"]
metadata += [f"License-File: {name}" for name in project["license-files"]]
metadata += [f"Requires-Dist: {d}" for d in project["dependencies"]]
for extra, requirements in project.get("optional-dependencies", {}).items():
    metadata.append(f"Provides-Extra: {extra}")
    metadata += [f'Requires-Dist: {r}; extra == "{extra}"'
                 for r in requirements]
scripts = ["[console_scripts]"] + [
    f"{name} = {target}" for name, target in project["scripts"].items()]
meta = {
    f"{dist_info}/METADATA": "\n".join(metadata) + "\n",
    f"{dist_info}/WHEEL": (
        "Wheel-Version: 1.0\nGenerator: flexsn utils/build_wheel.sh\n"
        "Root-Is-Purelib: false\nTag: " + tag + "\n"),
    f"{dist_info}/entry_points.txt": "\n".join(scripts) + "\n",
}
record = []
name = out / f"flexsn-{version}-{tag}.whl"
def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b"=").decode()
with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as whl:
    for arc, path in files.items():
        data = path.read_bytes()
        info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        info.external_attr = (stat.S_IFREG | mode) << 16
        whl.writestr(info, data)
        record.append(f"{arc},{digest(data)},{len(data)}")
    for arc, text in meta.items():
        data = text.encode()
        whl.writestr(zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0)), data)
        record.append(f"{arc},{digest(data)},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    whl.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD",
                                 date_time=(2026, 1, 1, 0, 0, 0)),
                 "\n".join(record) + "\n")
print(f"{name} ({name.stat().st_size / 2**20:.1f} MiB)")
PYEOF
