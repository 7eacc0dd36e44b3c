"""Checks that the fuzzing dictionary names every surrogate and every enum
case of the dialect.

    python3 check_dictionary.py DICT DIALECT_DOC
"""
import re
import sys

words = set(re.findall(r'^"(.*)"$', open(sys.argv[1]).read(), re.MULTILINE))
surrogates = set(
    re.findall(
        r"^#flexsn\.([a-z0-9_]+)$", open(sys.argv[2]).read(), re.MULTILINE
    )
)
if len(surrogates) < 10:
    sys.exit(f"found only {len(surrogates)} surrogates in {sys.argv[2]}")
missing = sorted(s for s in surrogates if "#flexsn." + s not in words)
if missing:
    sys.exit("not in the dictionary: " + ", ".join(missing))
print(f"{len(surrogates)} surrogates in the dictionary")

# The enums' case strings: the third column of the tables under "## Enums".
enums = open(sys.argv[2]).read().split("\n## Enums", 1)
if len(enums) != 2:
    sys.exit(f"no enums in {sys.argv[2]}")
cases = set(
    re.findall(r"^\| \w+ \| `\d+` \| (\S+) \|$", enums[1], re.MULTILINE)
)
if len(cases) < 20:
    sys.exit(f"found only {len(cases)} enum cases in {sys.argv[2]}")
missing = sorted(c for c in cases if c not in words)
if missing:
    sys.exit("enum cases not in the dictionary: " + ", ".join(missing))
print(f"{len(cases)} enum cases in the dictionary")
