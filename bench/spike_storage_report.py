"""Writes the spike-storage benchmark's report from a `bench lif` run.

    python3 -m bench spike-storage-report RESULTS.json OUT_DIR

Reads the `spike_storage` records (bench/spikes.py's bench_spike_storage)
and the copy bandwidth of the same run from RESULTS.json (lif's
results.json), and writes OUT_DIR/spike_storage_results.json (the records
and the run's metadata), spike_storage_results.md (the table) and
spike_storage.svg (% of copy of the dense, u8 and bits kernels per row,
and the u8 and bits speedups). Plain SVG: no plotting package needed.
"""

import json
import os

from . import cli, spikes

KEEP_META = (
    "device",
    "torch",
    "cuda",
    "flexsn",
    "copy_gbs",
    "copy_end_gbs",
    "reps",
)


def row_label(d):
    return "%s %s T=%d" % (d["variant"].replace("_", "-"), d["dtype"], d["T"])


STORAGES = (("dense", "#9aa9c9"), ("u8", "#2f5fb3"), ("bits", "#17355f"))


def svg(records, meta):
    bar, gap, left, top, height = 12, 12, 150, 40, 180
    bars = len(STORAGES)
    width = left + len(records) * (bars * bar + gap) + 60
    total = top + height + 110
    y = lambda f: top + height * (1 - min(f, 1.0))  # noqa: E731
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'font-family="sans-serif" font-size="11">' % (width, total),
        '<text x="%d" y="18" font-size="13">LIF, N = 2^%d, %s: %% of copy '
        "(%.0f GB/s); labels: u8 and bits speedups over dense</text>"
        % (
            left,
            records[0]["N"].bit_length() - 1,
            meta["device"],
            meta["copy_gbs"],
        ),
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            '<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
            '<text x="%d" y="%.1f" text-anchor="end">%d%%</text>'
            % (
                left - 5,
                width - 40,
                y(frac),
                y(frac),
                left - 8,
                y(frac) + 4,
                100 * frac,
            )
        )
    for i, d in enumerate(records):
        x = left + i * (bars * bar + gap)
        for j, (key, color) in enumerate(STORAGES):
            f = d[key]["frac_copy"]
            out.append(
                '<rect x="%d" y="%.1f" width="%d" height="%.1f" '
                'fill="%s"/>'
                % (x + j * bar, y(f), bar - 1, top + height - y(f), color)
            )
        top_bar = y(max(d[key]["frac_copy"] for key, _ in STORAGES))
        for k, key in enumerate(("bits_speedup", "speedup")):
            out.append(
                '<text x="%d" y="%.1f" text-anchor="middle" '
                'font-size="9">x%.2f</text>'
                % (x + bars * bar / 2, top_bar - 4 - 11 * k, d[key])
            )
        out.append(
            '<text transform="translate(%d,%d) rotate(60)">%s</text>'
            % (x + 4, top + height + 10, row_label(d))
        )
    for j, (key, color) in enumerate(STORAGES):
        out.append(
            '<rect x="%d" y="%d" width="10" height="10" fill="%s"/>'
            '<text x="%d" y="%d">%s spikes</text>'
            % (width - 150, 26 + 14 * j, color, width - 136, 35 + 14 * j, key)
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def markdown(records, meta):
    lines = [
        "# Spikes stored as bytes and bits on an H200",
        "",
        "From the benchmark step of `bash utils/device_run.sh` "
        "(`python3 -m bench lif`, `bench_spike_storage`), %s, torch %s, "
        "copy %.0f GB/s measured in the same run (%.0f at its end). "
        "LIF's inference (x, spike, v_seq) and final-state (x, spike, "
        "v_final) kernels on the same inputs, spikes in the storage "
        "type (dense), as uint8 (u8) or bit-packed, 8 per byte "
        "(bits); median of %d runs; %% of copy on "
        "each call's own bytes (above 100 where a call mostly reads, "
        "as a bits final-state call does: the copy reads and writes "
        "equal amounts, and reads alone run faster). x SJ: the time "
        "of SpikingJelly's "
        "fastest kernel for an inference call of its multi-step LIF "
        "(0.870 ms at f32, T = 16, measured side by side with FlexSN "
        "on an H200, docs/Reference.md; not in this run) over u8's; "
        "that call returns the spikes and the final v, as FlexSN's "
        "final-state call does, and writes the v sequence, as its "
        "inference call does (u8 / bits). "
        "same: the u8 spikes equal the dense ones, the bits equal the "
        "dense spikes packed with torch ops, and the states are "
        "bitwise equal."
        % (
            meta["device"],
            meta["torch"],
            meta["copy_gbs"],
            meta.get("copy_end_gbs") or 0,
            meta["reps"],
        ),
        "",
        "![% of copy](spike_storage.svg)",
        "",
    ]
    lines += spikes.table(records, sj_head="x SJ (u8 / bits)")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = cli.parser("spike-storage-report", __doc__)
    ap.add_argument(
        "results",
        metavar="RESULTS.json",
        help="a `python3 -m bench lif` run's results.json",
    )
    ap.add_argument("out", metavar="OUT_DIR")
    args = ap.parse_args(argv)
    with open(args.results) as f:
        doc = json.load(f)
    meta = doc["meta"]
    records = meta.get("spike_storage")
    if not records:
        ap.error("%s has no spike_storage records" % args.results)
    if any("bits" not in d for d in records):
        ap.error(
            "%s predates the bits kernels: rerun python3 -m bench lif"
            % args.results
        )
    os.makedirs(args.out, exist_ok=True)
    kept = {k: meta.get(k) for k in KEEP_META}
    with open(os.path.join(args.out, "spike_storage_results.json"), "w") as f:
        json.dump(dict(meta=kept, spike_storage=records), f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "spike_storage_results.md"), "w") as f:
        f.write(markdown(records, kept))
    with open(os.path.join(args.out, "spike_storage.svg"), "w") as f:
        f.write(svg(records, kept))
    return 0
