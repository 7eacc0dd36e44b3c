#!/usr/bin/env python3
"""Like LLVM's `not`, but stricter: runs the command and succeeds only if it
exits with exactly 1 and prints exactly one line (stdout and stderr
together), which it passes on (to stdout) for FileCheck.

    expect_error.py flexsn-run ARGS... | FileCheck ...
"""

import subprocess
import sys

if len(sys.argv) < 2:
    sys.exit("usage: expect_error.py COMMAND [ARGS...]")
p = subprocess.run(
    sys.argv[1:],
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    errors="replace",
)
sys.stdout.write(p.stdout)
sys.stdout.flush()
lines = p.stdout.splitlines()
if p.returncode != 1:
    sys.exit("expect_error.py: expected exit code 1, got %d" % p.returncode)
if len(lines) != 1:
    sys.exit(
        "expect_error.py: expected one line of output, got %d" % len(lines)
    )
