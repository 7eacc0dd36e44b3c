#!/usr/bin/env python3
"""Writes a float32 .npy file of ones: write_npy.py PATH D0,D1,...

Spelled out (format 1.0), so that shapes numpy cannot create (more than 32
dimensions before numpy 2.0) can be written too.
"""

import struct
import sys

path, dims = sys.argv[1], [int(d) for d in sys.argv[2].split(",")]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
    ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "")
)
# Magic (6) + version (2) + length (2) + header + '\n', a multiple of 64.
header += " " * (-(10 + len(header) + 1) % 64) + "\n"
count = 1
for d in dims:
    count *= d
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
    f.write(header.encode("latin1"))
    f.write(struct.pack("<%df" % count, *([1.0] * count)))
