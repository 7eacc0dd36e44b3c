"""Checks that the fuzzing dictionary names every surrogate of the dialect.

    python3 check_dictionary.py DICT DIALECT_DOC
"""
import re
import sys

words = set(re.findall(r'^"(.*)"$', open(sys.argv[1]).read(), re.MULTILINE))
surrogates = set(re.findall(r"^#flexsn\.([a-z0-9_]+)$", open(sys.argv[2]).read(),
                            re.MULTILINE))
if len(surrogates) < 10:
    sys.exit(f"found only {len(surrogates)} surrogates in {sys.argv[2]}")
missing = sorted(s for s in surrogates if "#flexsn." + s not in words)
if missing:
    sys.exit("not in the dictionary: " + ", ".join(missing))
print(f"{len(surrogates)} surrogates in the dictionary")
