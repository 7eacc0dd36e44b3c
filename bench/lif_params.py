"""lif's parameter-gradient rows (PLIF, f32, on a GPU): the atomic and the
deterministic reduction of w's gradient, and a per-channel w against a
scalar one over several [B, C, S] layouts."""

import math
import sys

from . import traffic
from .kernels import addresses, new_workspace

PROG = "bench lif"

# (C, S) layouts of N neurons [B, C, S] for the per-channel rows: a conv
# layer's feature maps (S = H W), small ones, a linear layer (S = 1: one
# channel per neuron of a sample), one channel.
CHANNEL_LAYOUTS = ((64, 1024), (256, 64), (4096, 1), (1, 1 << 14))


def bench_deterministic(torch, plif, timer, N, Ts=(4, 16)):
    """PLIF's backward, f32: the atomic and the deterministic reduction of
    w's gradient on the same inputs. Returns one record per T: both times,
    the deterministic result's spread over 5 calls (must be 0) and its
    distance from the atomic one."""
    import flexsn

    out = []
    try:
        kf = plif.kernel("cuda", "forward", "f32")
        kb = plif.kernel("cuda", "backward", "f32")
        kd = plif.kernel("cuda", "backward", "f32", deterministic=True)
    except KeyError as e:
        print("%s: no deterministic rows: %s" % (PROG, e))
        return out
    stream = torch.cuda.current_stream().cuda_stream
    w = [-math.log(2.0 - 1.0)]  # init_tau = 2
    for T in Ts:
        gen = torch.Generator(device="cuda").manual_seed(T)
        x = torch.randn((T, N), device="cuda", generator=gen) * 0.5 + 0.8
        gs = torch.randn((T, N), device="cuda", generator=gen)
        ws = new_workspace(torch, (kf, kb, kd), T, N)
        spike, xg = torch.empty_like(x), torch.empty_like(x)
        wg = torch.zeros(1, device="cuda")
        wp = ws.data_ptr()
        rec = dict(T=T, N=N, status="FLEXSN_SUCCESS")
        try:
            kf.launch(
                stream, T, N, 0, addresses(kf, {"x": x, "spike": spike}), wp, w
            )
            for k, name in ((kb, "atomic"), (kd, "deterministic")):
                ptrs = addresses(
                    k, {"spike_grad": gs, "x": x, "x_grad": xg, "w_grad": wg}
                )

                def call(k=k, ptrs=ptrs):
                    k.launch(stream, T, N, 0, ptrs, wp, w)

                values = []
                for _ in range(5):
                    call()
                    torch.cuda.synchronize()
                    values.append(float(wg.item()))
                ms, _ = timer.ms(call)
                rec[name] = dict(ms=ms, values=values)
        except flexsn.RuntimeStatusError as e:
            rec.update(status=e.status, error=str(e))
            print("%s: PLIF backward f32 T=%d: %s" % (PROG, T, e))
            out.append(rec)
            continue
        d = rec["deterministic"]["values"]
        rec["deterministic_spread"] = max(d) - min(d)
        rec["overhead"] = rec["deterministic"]["ms"] / rec["atomic"]["ms"] - 1
        print(
            "%s: PLIF backward f32 T=%d N=%d: atomic %.3f ms, "
            "deterministic %.3f ms (%+.1f%%); w_grad over 5 calls: atomic "
            "spread %.3g, deterministic spread %.3g"
            % (
                PROG,
                T,
                N,
                rec["atomic"]["ms"],
                rec["deterministic"]["ms"],
                100 * rec["overhead"],
                max(rec["atomic"]["values"]) - min(rec["atomic"]["values"]),
                rec["deterministic_spread"],
            )
        )
        sys.stdout.flush()
        out.append(rec)
        del x, gs, ws, spike, xg
        torch.cuda.empty_cache()
    return out


def bench_per_channel(torch, plif, timer, N, copy_gbs, Ts=(4, 16)):
    """PLIF's backward, f32, with a scalar w and with a per-channel w over
    the CHANNEL_LAYOUTS, on the same inputs: times, the fraction of the
    copy bandwidth on the bytes the backward must move
    (traffic.plif_backward_bytes), and the ratio to the scalar kernel. A
    per-channel layout also times the deterministic gradient: its kernel
    (each neuron's sum over time, [N]) and the torch sum over B and S that
    the PyTorch layer adds. One record per (T, layout)."""
    import flexsn

    out = []
    kernels = {
        name: (
            c.kernel("cuda", "forward", "f32"),
            c.kernel("cuda", "backward", "f32"),
        )
        for name, c in plif.items()
    }
    fixed = plif["per_channel"].kernel(
        "cuda", "backward", "f32", deterministic=True
    )
    stream = torch.cuda.current_stream().cuda_stream
    for T in Ts:
        gen = torch.Generator(device="cuda").manual_seed(100 + T)
        x = torch.randn((T, N), device="cuda", generator=gen) * 0.5 + 0.8
        gs = torch.randn((T, N), device="cuda", generator=gen)
        spike, xg = torch.empty_like(x), torch.empty_like(x)
        ws = new_workspace(
            torch, [k for pair in kernels.values() for k in pair], T, N
        )
        nbytes = traffic.plif_backward_bytes(T, N)
        scalar_ms = None
        for layout in (None,) + CHANNEL_LAYOUTS:
            kf, kb = kernels["scalar" if layout is None else "per_channel"]
            C = 1 if layout is None else layout[0]
            w = torch.linspace(-1.0, 1.0, C, device="cuda")
            wg = torch.zeros(C, device="cuda")
            # The per-channel kernels take w as a buffer, the scalar one
            # as a value.
            params = [0.0] if layout is None else []
            extra = {} if layout is None else {"w": w}
            rec = dict(
                T=T,
                N=N,
                layout=None
                if layout is None
                else dict(
                    C=layout[0], S=layout[1], B=N // (layout[0] * layout[1])
                ),
            )
            try:
                kf.launch(
                    stream,
                    T,
                    N,
                    0,
                    addresses(kf, dict(x=x, spike=spike, **extra)),
                    ws.data_ptr(),
                    params,
                    channels=layout,
                )
                ptrs = addresses(
                    kb, dict(spike_grad=gs, x=x, x_grad=xg, w_grad=wg, **extra)
                )

                def call(
                    ptrs=ptrs,
                    kb=kb,
                    layout=layout,
                    params=params,
                    wp=ws.data_ptr(),
                ):
                    kb.launch(
                        stream, T, N, 0, ptrs, wp, params, channels=layout
                    )

                ms, _ = timer.ms(call)
                if layout is not None:
                    terms = torch.empty(N, device="cuda")
                    fixed_ptrs = addresses(
                        fixed,
                        dict(spike_grad=gs, x=x, x_grad=xg, w_grad=terms, w=w),
                    )
                    B = N // (layout[0] * layout[1])

                    def fixed_call(
                        ptrs=fixed_ptrs,
                        layout=layout,
                        B=B,
                        terms=terms,
                        wp=ws.data_ptr(),
                    ):
                        fixed.launch(
                            stream, T, N, 0, ptrs, wp, [], channels=layout
                        )
                        return terms.view(B, layout[0], -1).sum((0, 2))

                    fixed_ms, _ = timer.ms(fixed_call)
                    got = fixed_call()
                    torch.cuda.synchronize()
                    rec["deterministic_ms"] = fixed_ms
                    rec["deterministic_close"] = bool(
                        torch.allclose(
                            got,
                            wg,
                            rtol=1e-3,
                            atol=1e-3 * float(wg.abs().max()),
                        )
                    )
            except flexsn.RuntimeStatusError as e:
                rec.update(status=e.status, error=str(e))
                out.append(rec)
                continue
            rec.update(
                status="FLEXSN_SUCCESS",
                ms=ms,
                frac_copy=traffic.frac_copy(nbytes, ms, copy_gbs),
            )
            if layout is None:
                scalar_ms = ms
            elif scalar_ms:
                rec["vs_scalar"] = ms / scalar_ms
                rec["deterministic_vs_scalar"] = (
                    rec["deterministic_ms"] / scalar_ms
                )
            print(
                "%s: PLIF backward f32 T=%d N=2^%d %s: %.4f ms, "
                "%.1f%% of copy%s"
                % (
                    PROG,
                    T,
                    N.bit_length() - 1,
                    "scalar w"
                    if layout is None
                    else "per-channel w C=%d S=%d" % layout,
                    ms,
                    100 * rec["frac_copy"],
                    ", x%.3f of scalar; deterministic %.4f ms (x%.3f)%s"
                    % (
                        rec["vs_scalar"],
                        rec["deterministic_ms"],
                        rec["deterministic_vs_scalar"],
                        ""
                        if rec["deterministic_close"]
                        else ", GRADIENTS DIFFER",
                    )
                    if "vs_scalar" in rec
                    else "",
                )
            )
            sys.stdout.flush()
            out.append(rec)
        del x, gs, ws, spike, xg
        torch.cuda.empty_cache()
    return out


def deterministic_md(records):
    """results.md's section on the atomic vs deterministic rows."""
    lines = [
        "",
        "## Parameter gradients: atomic vs deterministic",
        "",
        "PLIF backward (w trainable), f32, same inputs; w_grad over "
        "5 calls.",
        "",
        "| N | T | atomic ms | deterministic ms | overhead "
        "| atomic spread | deterministic spread |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in records:
        if d.get("status") != "FLEXSN_SUCCESS":
            lines.append(
                "| 2^%d | %d | %s | | | | |"
                % (d["N"].bit_length() - 1, d["T"], d.get("status"))
            )
            continue
        a = d["atomic"]["values"]
        lines.append(
            "| 2^%d | %d | %.4f | %.4f | %+.1f%% | %.3g | %.3g |"
            % (
                d["N"].bit_length() - 1,
                d["T"],
                d["atomic"]["ms"],
                d["deterministic"]["ms"],
                100 * d["overhead"],
                max(a) - min(a),
                d["deterministic_spread"],
            )
        )
    return lines


def per_channel_md(records):
    """results.md's section on the per-channel rows."""
    lines = [
        "",
        "## Parameter gradients: per-channel w",
        "",
        "PLIF backward, f32, same inputs: w scalar, or one per "
        "channel of [B, C, S] neurons (atomic sums); % of copy on "
        "T N (3 es + 4) bytes. Deterministic: the deterministic "
        "kernel (each neuron's sum over time) and the torch sum "
        "over B and S after it; close: its w_grad agrees with the "
        "atomic kernel's (rtol 1e-3).",
        "",
        "| N | T | w | B, C, S | ms | % copy | x scalar "
        "| deterministic ms | x scalar | close |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in records:
        lay = d["layout"]
        shape = (
            ""
            if lay is None
            else "%d, %d, %d" % (lay["B"], lay["C"], lay["S"])
        )
        what = "scalar" if lay is None else "per-channel"
        if d.get("status") != "FLEXSN_SUCCESS":
            lines.append(
                "| 2^%d | %d | %s | %s | %s | | |"
                % (
                    d["N"].bit_length() - 1,
                    d["T"],
                    what,
                    shape,
                    d.get("status"),
                )
            )
            continue
        fixed = (
            "| %.4f | %.3f | %s"
            % (
                d["deterministic_ms"],
                d["deterministic_vs_scalar"],
                "yes" if d["deterministic_close"] else "NO",
            )
            if "deterministic_vs_scalar" in d
            else "| | |"
        )
        lines.append(
            "| 2^%d | %d | %s | %s | %.4f | %.1f | %s %s |"
            % (
                d["N"].bit_length() - 1,
                d["T"],
                what,
                shape,
                d["ms"],
                100 * d["frac_copy"],
                "%.3f" % d["vs_scalar"] if "vs_scalar" in d else "",
                fixed,
            )
        )
    return lines
