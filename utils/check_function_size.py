#!/usr/bin/env python3
"""Fails on a C++ function of more than 150 lines in the tracked .cpp and
.h files of lib/, include/ and tools/ (docs/Contributing.md; tests may hold
longer tables of cases), naming it.

A brace counter, not a parser: comments, string and character literals are
blanked, then a brace opened outside any function after a statement that
holds a parenthesis (a function's head) starts a function, and its matching
brace ends it. Namespaces, classes, structs, enums, unions and `extern "C"`
blocks are not functions; the methods defined inside a class are.
utils/check_format.sh runs it."""

import pathlib
import re
import subprocess
import sys

LIMIT = 150
NOT_A_FUNCTION = re.compile(
    r'\b(namespace|class|struct|enum|union)\b[^(]*$|extern\s*""\s*$'
)


def blank(text):
    """text with comments and literals replaced by spaces (newlines kept)."""
    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"' r"|'(?:\\.|[^'\\\n])*'", re.S
    )

    def keep_lines(match):
        s = match.group(0)
        if s[0] in "\"'":
            return s[0] * 2 + "\n" * s.count("\n")
        return re.sub(r"[^\n]", " ", s)

    return pattern.sub(keep_lines, text)


def long_functions(path):
    text = blank(path.read_text())
    stack, head_start, line = [], 0, 1
    function = None  # (first line, head, depth)
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == ";" and function is None:
            head_start = i + 1
        elif ch == "{":
            head = text[head_start:i]
            starts = (
                function is None
                and "(" in head
                and not NOT_A_FUNCTION.search(head.split("(")[0] + head[-20:])
            )
            if starts:
                first = line - head.strip().count("\n")
                name = " ".join(head.split())[:70]
                function = (first, name, len(stack))
            stack.append(starts)
            if function is None:
                head_start = i + 1
        elif ch == "}":
            starts = stack.pop() if stack else False
            if starts and function and len(stack) == function[2]:
                length = line - function[0] + 1
                if length > LIMIT:
                    yield function[0], length, function[1]
                function = None
            if function is None:
                head_start = i + 1


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        listed = subprocess.run(
            [
                "git",
                "ls-files",
                "--",
                "lib/*.cpp",
                "lib/*.h",
                "include/*.h",
                "tools/*.cpp",
                "tools/*.h",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        files = listed.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        # A source tree without its history.
        files = sorted(
            str(f.relative_to(root))
            for folder in ("lib", "include", "tools")
            for f in (root / folder).rglob("*")
            if f.suffix in (".cpp", ".h")
        )
    found = [
        f"  {name}:{first}: {length} lines: {head}"
        for name in files
        for first, length, head in long_functions(root / name)
    ]
    if found:
        print(
            f"functions over {LIMIT} lines (split them by what each part "
            "does):",
            file=sys.stderr,
        )
        print("\n".join(found), file=sys.stderr)
        return 1
    print(f"function size: none over {LIMIT} lines in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
