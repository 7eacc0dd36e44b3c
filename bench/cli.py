"""What every benchmark's command line shares: the parser, --out and
--smoke, the device it runs on, and the line for a part it skips."""

import argparse
import sys
import tempfile


def parser(name, doc):
    """An ArgumentParser for `python3 -m bench NAME`, its description the
    first line of the benchmark's docstring."""
    return argparse.ArgumentParser(
        prog="python3 -m bench " + name,
        description=doc.strip().splitlines()[0],
    )


def add_out_and_smoke(ap, out):
    """--out (default `out`; with --smoke a new temporary folder) and
    --smoke."""
    ap.add_argument(
        "--out",
        default=None,
        help="the results' folder (default %s)" % (out or "none: print only"),
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes on the CPU, few repeats, no plot, "
        "into a temporary folder unless --out is given: checks "
        "that the benchmark runs, not how fast",
    )
    ap.set_defaults(default_out=out)


def finish(args):
    """Resolves --out once parsed; returns args."""
    if args.out is None:
        args.out = (
            tempfile.mkdtemp(prefix="flexsn-bench-")
            if args.smoke
            else args.default_out
        )
    return args


def device(torch, args, prog):
    """ "cpu" with --smoke, else "cuda"; None (after saying why) where no
    CUDA GPU is present."""
    if args.smoke:
        return "cpu"
    if not torch.cuda.is_available():
        print(
            "%s: needs a CUDA GPU (--smoke runs tiny shapes on the CPU)"
            % prog,
            file=sys.stderr,
        )
        return None
    return "cuda"


def skip(prog, what, why="needs a CUDA GPU"):
    """Says that a part of the benchmark did not run and why; returns the
    reason, for the results."""
    print("%s: %s: skipped (%s)" % (prog, what, why))
    sys.stdout.flush()
    return why


def device_name(torch, device):
    """The GPU's name, or the CPU's, for the results."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(0)
    import platform

    return "CPU (%s)" % (platform.processor() or platform.machine())


def gpu_with_spikingjelly(torch, args, prog):
    """Whether the run can go on: a CUDA GPU (see device) and SpikingJelly
    importable (PYTHONPATH); else says which is missing."""
    if device(torch, args, prog) is None:
        return False
    try:
        import spikingjelly.activation_based.model  # noqa: F401
    except ImportError as error:
        print(
            "%s: needs SpikingJelly on PYTHONPATH (%s)" % (prog, error),
            file=sys.stderr,
        )
        return False
    return True
