#!/usr/bin/env python3
"""Assembles the seed corpus of the .mlir fuzz targets.

    python3 utils/fuzz_corpus.py OUT_DIR

Writes one file per module into OUT_DIR: every shipped neuron
(lib/Neurons), every split of the lit tests' .mlir files (at `// -----`),
and every ```mlir block of the docs, named by a hash of their text so that
duplicates collapse. The fuzz targets start from these (utils/fuzz.sh).
"""

import hashlib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPLIT = re.compile(r"^// -----\s*$", re.MULTILINE)
DOC_BLOCK = re.compile(r"```mlir\n(.*?)```", re.DOTALL)


def modules():
    for path in sorted((ROOT / "lib" / "Neurons").glob("*.mlir")):
        yield path.read_text()
    for path in sorted((ROOT / "test").rglob("*.mlir")):
        # Drop the RUN/CHECK lines: they are comments, but only noise here.
        text = "\n".join(
            line
            for line in path.read_text().splitlines()
            if not re.match(r"\s*//\s*(RUN|CHECK|expected-)", line)
        )
        yield from SPLIT.split(text)
    for path in sorted((ROOT / "docs").rglob("*.md")):
        yield from DOC_BLOCK.findall(path.read_text())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for text in modules():
        text = text.strip() + "\n"
        if len(text) < 8:
            continue
        data = text.encode()
        (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
        count += 1
    print(f"{count} seed modules in {out}")


if __name__ == "__main__":
    main()
