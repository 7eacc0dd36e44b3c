"""python3 -m bench NAME [options]: runs one benchmark (--help lists them;
python3 -m bench NAME --help gives its options)."""

import importlib
import sys

# name -> (module, what it measures); listed by --help without importing
# any of them (most import torch).
BENCHMARKS = {
    "lif": (
        "lif",
        "LIF kernels and modules vs copy bandwidth, a same-mix "
        "stream, eager PyTorch and torch.compile",
    ),
    "cpu": (
        "cpu",
        "LIF's CPU kernels and LIFNode on 1 and 2 threads vs "
        "eager PyTorch and the copy bandwidth",
    ),
    "host": (
        "host",
        "the host's cost per call of small LIFNode and Block "
        "steps, next to an empty custom autograd op",
    ),
    "placement": (
        "placement",
        "how much lif's inference rows depend on "
        "where their buffers are allocated",
    ),
    "schedule": (
        "schedule",
        "where the inference kernel's gap to the "
        "same-mix stream comes from (address order)",
    ),
    "saved-storage": (
        "saved_storage",
        "LIF training with the charge saved " "in f32 or in the storage type",
    ),
    "block": (
        "block",
        "a spiking block (BN-apply + LIF + residual) as one "
        "inference kernel vs unfused",
    ),
    "block-train": (
        "block_train",
        "training that block as one kernel "
        "pair vs three kernels, eager and torch.compile",
    ),
    "resnet": (
        "resnet",
        "end-to-end training of SpikingJelly's ResNets: "
        "FlexSN unfused and fused vs SpikingJelly and torch.compile",
    ),
    "zoo": (
        "zoo",
        "training steps of SpikingJelly's model zoo (Spikformer, "
        "VGG-16, ResNet-18s): FlexSN converted, fused, compiled vs "
        "torch.compile and the no-neuron floor",
    ),
    "recurrent": (
        "recurrent",
        "training a recurrent LIF layer at SHD "
        "scale: flexsn.torch.Recurrent vs eager and compiled "
        "per-step loops",
    ),
    "fx": (
        "fx",
        "neurons written in Python (flexsn.fx) vs the shipped " "ones",
    ),
    "device-torch": (
        "device_torch",
        "the PyTorch layer on a GPU: "
        "correctness, torch.compile, digits training",
    ),
    "device-ddp": (
        "device_ddp",
        "DistributedDataParallel over 2 GPUs with " "LIFNode",
    ),
    "spike-storage-report": (
        "spike_storage_report",
        "the spike-storage "
        "report (json, md, svg) from lif's "
        "results.json",
    ),
}


def usage():
    lines = [
        "usage: python3 -m bench NAME [options]   (NAME --help: its "
        "options; --smoke: tiny shapes on the CPU)",
        "",
        "benchmarks:",
    ]
    lines += [
        "  %-21s %s" % (name, what) for name, (_, what) in BENCHMARKS.items()
    ]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name = argv[0].replace("_", "-")
    if name not in BENCHMARKS:
        print(
            "python3 -m bench: no benchmark '%s'\n\n%s" % (argv[0], usage()),
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module("bench." + BENCHMARKS[name][0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
