"""The command line shared by the standalone GPU check scripts
(channel_kernel_checks.py, bit_spike_checks.py): compile, or run named
checks and report them.

    sys.exit(check_cli.main(__doc__, "what --quick keeps", compile_neuron,
                            checks))

`checks(torch, compiled, quick)` lists (name, check) pairs; a check returns
(ok, message). One line per check on stdout, then "<passed> of <total>
passed in <s> s" (which utils/device_run.sh reads); --out DIR also writes
DIR/results.json. Exit status 0 when every check passes, 1 when one fails,
2 without a CUDA device."""

import argparse
import json
import os
import time


def main(doc, quick_help, compile_neuron, checks):
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", help="directory for results.json")
    args = parser.parse_args()
    compiled = compile_neuron()
    if args.compile_only:
        print("compiled", compiled.directory)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    records, failed = [], 0
    start = time.time()
    for name, check in checks(torch, compiled, args.quick):
        ok, message = check()
        failed += not ok
        print(("ok   " if ok else "FAIL ") + name + ": " + message)
        records.append({"case": name, "ok": ok, "message": message})
    print(
        f"{len(records) - failed} of {len(records)} passed in "
        f"{time.time() - start:.1f} s"
    )
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(records, f, indent=1)
    return 1 if failed else 0
