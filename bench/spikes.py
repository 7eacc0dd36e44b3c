"""lif's spike-storage rows: LIF's inference and final-state kernels
storing spikes in the storage type (dense), as bytes (u8) and as bits, on
the same inputs; and the table that results.md and spike-storage-report
both print."""

import sys

from . import traffic
from .kernels import ELEM, KERNEL_VARIANT, addresses, binder, tdtypes

PROG = "bench lif"

# SpikingJelly's fastest kernel for an inference call of its multi-step LIF
# (its FlexSN kernel: 0.870 ms), measured side by side with FlexSN's
# inference kernel (0.822 ms) on an H200 (LIF, f32, T = 16, N = 2^24;
# docs/Reference.md). The user gets the spikes and the final v, what
# FlexSN's final-state call returns; its kernel writes the v sequence too,
# as FlexSN's inference call does: both are compared.
SJ_BEST_MS = {
    ("inference", "f32", 16): 0.870,
    ("final_state", "f32", 16): 0.870,
}
SJ_N = 1 << 24
SPIKE_ES = dict(dense=None, u8=1, bits=1 / 8)


def pack_spikes(torch, spikes):
    """[T, N] 0/1 spikes (N a multiple of 8) packed 8 per byte, least
    significant bit first: the bits kernels' layout, computed with torch
    ops."""
    T, N = spikes.shape
    weights = torch.tensor(
        [1 << i for i in range(8)], device=spikes.device, dtype=torch.int32
    )
    return (
        (spikes.reshape(T, N // 8, 8).to(torch.int32) * weights)
        .sum(-1)
        .to(torch.uint8)
    )


def bench_spike_storage(torch, lif_u8, timer, N, copy_gbs, Ts=(4, 16, 64)):
    """LIF's inference and final-state kernels storing spikes in the
    storage type, as bytes and as bits, on the same inputs: times, the
    fraction of the copy bandwidth on each call's own bytes, the speedups
    of bytes and bits over dense, and whether all wrote the same spikes
    (and states, bitwise)."""
    out = []
    device = timer.device
    bind = binder(torch, device)
    tdt = tdtypes(torch)
    for variant in ("final_state", "inference"):
        for dtype in ("f32", "f16"):
            es = ELEM[dtype]
            kv = KERNEL_VARIANT[variant]
            kernels = {
                s: lif_u8.kernel(
                    device,
                    kv,
                    dtype,
                    options={} if s == "dense" else {"spike_storage": s},
                )
                for s in ("dense", "u8", "bits")
            }
            for T in Ts:
                gen = torch.Generator(device=device).manual_seed(200 + T)
                x = (
                    torch.randn((T, N), device=device, generator=gen) * 0.5
                    + 0.8
                ).to(tdt[dtype])
                v0 = torch.zeros(N, device=device, dtype=tdt[dtype])
                rec = dict(variant=variant, dtype=dtype, T=T, N=N)
                got = {}
                for s, k in kernels.items():
                    spike = torch.empty(
                        (T, N // 8 if s == "bits" else N),
                        device=device,
                        dtype=tdt[dtype] if s == "dense" else torch.uint8,
                    )
                    state = torch.empty(
                        (T, N) if variant == "inference" else (N,),
                        device=device,
                        dtype=tdt[dtype],
                    )
                    names = dict(x=x, v_init=v0, spike=spike)
                    names[
                        "v_seq" if variant == "inference" else "v_final"
                    ] = state
                    ms, _ = timer.ms(bind(k, T, N, addresses(k, names)))
                    nbytes = traffic.lif_bytes(
                        variant, T, N, es, spike_es=SPIKE_ES[s]
                    )
                    rec[s] = dict(
                        ms=ms,
                        frac_copy=traffic.frac_copy(nbytes, ms, copy_gbs),
                    )
                    got[s] = (spike, state)
                rec["speedup"] = rec["dense"]["ms"] / rec["u8"]["ms"]
                rec["bits_speedup"] = rec["dense"]["ms"] / rec["bits"]["ms"]
                dense_spikes = got["dense"][0]
                rec["same"] = bool(
                    torch.equal(got["u8"][0], dense_spikes.to(torch.uint8))
                    and torch.equal(got["u8"][1], got["dense"][1])
                    and torch.equal(
                        got["bits"][0], pack_spikes(torch, dense_spikes)
                    )
                    and torch.equal(got["bits"][1], got["dense"][1])
                )
                sj = SJ_BEST_MS.get((variant, dtype, T)) if N == SJ_N else None
                if sj:
                    rec["vs_sj_best"] = sj / rec["u8"]["ms"]
                    rec["bits_vs_sj_best"] = sj / rec["bits"]["ms"]
                print(
                    "%s: LIF %s %s T=%d N=2^%d spikes dense %.4f ms "
                    "(%.1f%% of copy), u8 %.4f ms (%.1f%%): x%.3f, bits "
                    "%.4f ms (%.1f%%): x%.3f%s%s"
                    % (
                        PROG,
                        variant,
                        dtype,
                        T,
                        N.bit_length() - 1,
                        rec["dense"]["ms"],
                        100 * rec["dense"]["frac_copy"],
                        rec["u8"]["ms"],
                        100 * rec["u8"]["frac_copy"],
                        rec["speedup"],
                        rec["bits"]["ms"],
                        100 * rec["bits"]["frac_copy"],
                        rec["bits_speedup"],
                        ", x%.2f / x%.2f of SpikingJelly's best"
                        % (rec["vs_sj_best"], rec["bits_vs_sj_best"])
                        if sj
                        else "",
                        "" if rec["same"] else ", SPIKES DIFFER",
                    )
                )
                sys.stdout.flush()
                out.append(rec)
                del x, got
                timer.free()
    return out


def table(records, sj_head="x SJ"):
    """The markdown table of spike-storage records (its header and rows)."""
    lines = [
        "| N | variant | dtype | T | dense ms | % copy | u8 ms "
        "| % copy | x dense | bits ms | % copy | x dense | "
        + sj_head
        + " | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in records:
        sj = d.get("vs_sj_best")
        lines.append(
            "| 2^%d | %s | %s | %d | %.4f | %.1f | %.4f | %.1f "
            "| %.3f | %.4f | %.1f | %.3f | %s | %s |"
            % (
                d["N"].bit_length() - 1,
                d["variant"],
                d["dtype"],
                d["T"],
                d["dense"]["ms"],
                100 * d["dense"]["frac_copy"],
                d["u8"]["ms"],
                100 * d["u8"]["frac_copy"],
                d["speedup"],
                d["bits"]["ms"],
                100 * d["bits"]["frac_copy"],
                d["bits_speedup"],
                "%.2f / %.2f" % (sj, d["bits_vs_sj_best"]) if sj else "-",
                "yes" if d["same"] else "NO",
            )
        )
    return lines
