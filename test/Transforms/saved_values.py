"""Prints, for a module after flexsn-autodiff, each forward kernel's saved
values and how many of them are spikes (flexsn.spike results).

    saved_values.py FILE

One line per forward kernel: "<name>: saved <k> value(s), <spikes> spike(s)".
The forward step yields its outputs, then its saved values, then its new
states; the kernel signature says how many are saved.
"""

import re
import sys

text = open(sys.argv[1]).read()
for match in re.finditer(
    r"func\.func @(\w+_forward_\w+)\((.*?)\n  \}\n", text, re.S
):
    name, body = match.group(1), match.group(0)
    saved = int(
        re.search(r"workspace_sequences = (\d+)", body).group(1)
        if "workspace_sequences" in body
        else 0
    )
    outputs = body.splitlines()[0].count("output_sequence")
    # The step's yield: the last flexsn.yield of the kernel.
    values = [
        v.strip()
        for v in re.findall(r"flexsn\.yield (.*?) :", body)[-1].split(",")
    ]
    saved_values = values[outputs : outputs + saved]
    spikes = set(re.findall(r"(%\w+) = flexsn\.spike ", body))
    print(
        f"{name}: saved {len(saved_values)} value(s), "
        f"{sum(v in spikes for v in saved_values)} spike(s)"
    )
