"""Where the inference kernel's gap to the same-mix stream comes from.

    python3 -m bench schedule [--out DIR]
    python3 -m bench schedule --smoke     # the FlexSN kernel alone, CPU

FlexSN's kernels give each thread a group of neurons and run the whole time
loop in that thread, so at any moment the blocks in flight read and write
rows at different steps t of each [T, N] array. This benchmark separates the
address order that schedule produces from everything else. For LIF
inference (x in, spike and v_seq out; v_init NULL, so 3 T N elements
move), f32 and f16, T in {4, 16, 64}, N = 2^24, it times on the same
buffers, in turn twice, against a copy measured just before each group:

- flexsn: the shipped kernel (`flexsn.compile("lif")`, as bench lif);
- thread_loop: the same schedule written by hand in CUDA C (16-byte
  accesses, 256 threads, 32 registers): the compiler's code against a
  hand-written one;
- block_sync: thread_loop with a __syncthreads() per step (the warps of a
  block at one step);
- paced_D<d>: a persistent grid (8 blocks per SM, all resident) in soft
  lockstep: a block starts step s once every block finished step s - d
  (one relaxed atomic per block and step, a spin by one thread); the
  counters are zeroed in the timed call;
- stream: the same-mix stream (one thread per 16 bytes, rows in order);
- stream_chunk_major: the same stream with blocks in the order the
  recurrence kernel visits memory: block b moves one 4 KB chunk (256 x 16
  B) of row b mod T, chunk b / T, so consecutive blocks walk one chunk's
  rows;
- stream_band_<B>: B chunks of one row, then the same B chunks of the next
  row (B blocks in lockstep; B = 1024 is about the blocks an H200 holds).

Whether the hand-written kernels write what flexsn writes (spikes and v,
bitwise) is checked. Writes schedule_results.json and .md to --out.
The hand-written kernels and streams need CuPy and a GPU: --smoke times
FlexSN's CPU kernel at N = 2^12 alone.
"""

import statistics
import sys

from . import cli, kernels, results, traffic
from .timing import Timer

PROG = "bench schedule"
N = 1 << 24
TS = (4, 16, 64)
DTYPES = ("f32", "f16")
BANDS = (256, 1024, 4096)
PACING = (8, 32)
BLOCKS_PER_SM = 8
HAND_WRITTEN = ("thread_loop", "block_sync") + tuple(
    "paced_D%d" % d for d in PACING
)
SMOKE = dict(
    N=1 << 12, Ts=(4,), dtypes=("f32", "bf16"), reps=3, copy_bytes=8 << 20
)

SOURCE = r"""
struct F32 {
  typedef float4 V;
  enum { W = 4 };
  static __device__ void get(V v, float *f) {
    f[0] = v.x; f[1] = v.y; f[2] = v.z; f[3] = v.w;
  }
  static __device__ V put(const float *f) {
    return make_float4(f[0], f[1], f[2], f[3]);
  }
};
struct F16 {
  typedef uint4 V;
  enum { W = 8 };
  static __device__ void get(V v, float *f) {
    const unsigned short *h = reinterpret_cast<const unsigned short *>(&v);
    for (int k = 0; k < 8; ++k)
      asm("cvt.f32.f16 %0, %1;" : "=f"(f[k]) : "h"(h[k]));
  }
  static __device__ V put(const float *f) {
    V v;
    unsigned short *h = reinterpret_cast<unsigned short *>(&v);
    for (int k = 0; k < 8; ++k)
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h[k]) : "f"(f[k]));
    return v;
  }
};

template <class E>
__device__ __forceinline__ void lif_step(float *h, typename E::V xv,
                                         typename E::V *s, typename E::V *v) {
  float x[E::W], sp[E::W];
  E::get(xv, x);
#pragma unroll
  for (int k = 0; k < E::W; ++k) {
    h[k] = h[k] + (x[k] - h[k]) * 0.5f;
    sp[k] = (h[k] - 1.0f >= 0.0f) ? 1.0f : 0.0f;
    h[k] = h[k] * (1.0f - sp[k]);
  }
  *s = E::put(sp);
  *v = E::put(h);
}

template <class E, bool SYNC>
__device__ void thread_loop(const typename E::V *__restrict__ x,
                            typename E::V *__restrict__ s,
                            typename E::V *__restrict__ v, long long T,
                            long long groups) {
  long long i = blockIdx.x * 256ll + threadIdx.x;
  if (!SYNC && i >= groups) return;
  float h[E::W] = {};
  for (long long t = 0; t < T; ++t) {
    if (i < groups) lif_step<E>(h, x[t * groups + i], s + t * groups + i,
                                v + t * groups + i);
    if (SYNC) __syncthreads();
  }
}

template <class E>
__device__ void paced(const typename E::V *__restrict__ x,
                      typename E::V *__restrict__ s,
                      typename E::V *__restrict__ v, long long T,
                      long long groups, unsigned *ctr, long long D) {
  unsigned G = gridDim.x;
  long long rounds = (groups + 256ll * G - 1) / (256ll * G);
  for (long long r = 0; r < rounds; ++r) {
    long long i = (r * G + blockIdx.x) * 256ll + threadIdx.x;
    float h[E::W] = {};
    for (long long t = 0; t < T; ++t) {
      long long step = r * T + t;
      if (step >= D && threadIdx.x == 0) {
        // Pacing only, no data passes: a bounded spin, so a grid that is
        // not all resident runs slowly instead of hanging.
        volatile unsigned *c = ctr + (step - D);
        for (int k = 0; k < (1 << 24) && *c < G; ++k) {
        }
      }
      __syncthreads();
      if (i < groups) lif_step<E>(h, x[t * groups + i], s + t * groups + i,
                                  v + t * groups + i);
      if (threadIdx.x == 0) atomicAdd(ctr + step, 1u);
    }
  }
}

#define KERNELS(E, e)                                                         \
  extern "C" __global__ void __launch_bounds__(256, 8) thread_loop_##e(       \
      const E::V *x, E::V *s, E::V *v, long long T, long long g) {            \
    thread_loop<E, false>(x, s, v, T, g);                                     \
  }                                                                           \
  extern "C" __global__ void __launch_bounds__(256, 8) block_sync_##e(        \
      const E::V *x, E::V *s, E::V *v, long long T, long long g) {            \
    thread_loop<E, true>(x, s, v, T, g);                                      \
  }                                                                           \
  extern "C" __global__ void __launch_bounds__(256, 8) paced_##e(             \
      const E::V *x, E::V *s, E::V *v, long long T, long long g,              \
      unsigned *ctr, long long D) {                                           \
    paced<E>(x, s, v, T, g, ctr, D);                                          \
  }
KERNELS(F32, f32)
KERNELS(F16, f16)

// 1 read, 2 writes of 16 bytes per thread; block b moves 4 KB of row t,
// chunk c: band == 0 rows in order (t = b / chunks), band < 0 chunk-major
// (t = b mod T), band > 0 `band` chunks of a row, then of the next row.
extern "C" __global__ void stream_order(const float4 *__restrict__ a,
                                        float4 *__restrict__ b,
                                        float4 *__restrict__ c, long long T,
                                        long long chunks, long long band) {
  long long blk = blockIdx.x, t, chunk;
  if (band == 0) {
    t = blk / chunks; chunk = blk % chunks;
  } else if (band < 0) {
    t = blk % T; chunk = blk / T;
  } else {
    long long in = blk % (band * T);
    t = in / band; chunk = blk / (band * T) * band + in % band;
  }
  if (chunk >= chunks) return;
  long long i = (t * chunks + chunk) * 256 + threadIdx.x;
  float4 w = a[i];
  b[i] = w;
  c[i] = w;
}
"""


def kernel_calls(torch, lif, timer, dtype, T, N, module=None):
    """{name: launch} on one set of buffers (FlexSN's kernel; with the CuPy
    `module`, the hand-written kernels and streams too), flexsn's outputs
    (s, v) for the equality check, and x."""
    device = timer.device
    tdt = kernels.tdtypes(torch)[dtype]
    x, _, _ = kernels.make_inputs(torch, "inference", dtype, T, N, device)
    s = torch.empty((T, N), dtype=tdt, device=device)
    v = torch.empty_like(s)
    kf = lif.kernel(device, "inference", dtype)
    calls = {
        "flexsn": kernels.binder(torch, device)(
            kf, T, N, kernels.addresses(kf, {"x": x, "spike": s, "v_seq": v})
        )
    }
    if module is None:
        return calls, (s, v), x
    import cupy as cp

    es = kernels.ELEM[dtype]
    ext = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    ptr = [cp.uint64(t.data_ptr()) for t in (x, s, v)]
    groups = N * es // 16
    grid = ((groups + 255) // 256,)
    for name in ("thread_loop", "block_sync"):
        f = module.get_function("%s_%s" % (name, dtype))
        calls[name] = lambda f=f: f(
            grid,
            (256,),
            (ptr[0], ptr[1], ptr[2], cp.int64(T), cp.int64(groups)),
            stream=ext,
        )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    G = BLOCKS_PER_SM * sms
    rounds = (groups + 256 * G - 1) // (256 * G)
    ctr = torch.zeros(rounds * T, dtype=torch.int32, device="cuda")
    f = module.get_function("paced_%s" % dtype)
    for D in PACING:

        def paced(f=f, D=D):
            ctr.zero_()
            f(
                (G,),
                (256,),
                (
                    ptr[0],
                    ptr[1],
                    ptr[2],
                    cp.int64(T),
                    cp.int64(groups),
                    cp.uint64(ctr.data_ptr()),
                    cp.int64(D),
                ),
                stream=ext,
            )

        calls["paced_D%d" % D] = paced

    stream = module.get_function("stream_order")
    chunks = groups // 256

    def order(band, blocks):
        return lambda: stream(
            (blocks,),
            (256,),
            (
                ptr[0],
                ptr[1],
                ptr[2],
                cp.int64(T),
                cp.int64(chunks),
                cp.int64(band),
            ),
            stream=ext,
        )

    calls["stream"] = order(0, T * chunks)
    calls["stream_chunk_major"] = order(-1, T * chunks)
    for band in BANDS:
        calls["stream_band_%d" % band] = order(
            band, (chunks + band - 1) // band * band * T
        )
    return calls, (s, v), x


def main(argv=None):
    ap = cli.parser("schedule", __doc__)
    cli.add_out_and_smoke(ap, "schedule-out")
    args = cli.finish(ap.parse_args(argv))
    import torch
    import flexsn

    device = cli.device(torch, args, PROG)
    if device is None:
        return 2
    smoke = args.smoke
    n, Ts, dtypes = (
        (SMOKE["N"], SMOKE["Ts"], SMOKE["dtypes"])
        if smoke
        else (N, TS, DTYPES)
    )
    lif = flexsn.compile("lif", **kernels.lif_compile(smoke))
    module = None
    if smoke:
        cli.skip(
            PROG,
            "the hand-written kernels and streams",
            "need CuPy and a CUDA GPU",
        )
    else:
        import cupy as cp

        module = cp.RawModule(
            code=SOURCE, options=("-std=c++11", "--fmad=false")
        )
    timer = Timer(torch, device, SMOKE["reps"] if smoke else 20, 3)
    meta = dict(
        device=cli.device_name(torch, device),
        torch=torch.__version__,
        N=n,
        rows=[],
    )
    print("%s: %s" % (PROG, meta["device"]))
    for dtype in dtypes:
        for T in Ts:
            calls, (s, v), x = kernel_calls(
                torch, lif, timer, dtype, T, n, module
            )
            nbytes = traffic.lif_bytes(
                "inference", T, n, kernels.ELEM[dtype], v_init=False
            )
            calls["flexsn"]()
            want = (s.clone(), v.clone())
            same = {}
            for name in HAND_WRITTEN if module is not None else ():
                s.fill_(float("nan"))
                v.fill_(float("nan"))
                calls[name]()
                timer.sync()
                same[name] = bool(
                    torch.equal(s, want[0]) and torch.equal(v, want[1])
                )
            copy, _ = traffic.copy_gbs(
                torch,
                timer,
                SMOKE["copy_bytes"] if smoke else traffic.COPY_BYTES,
            )
            times = timer.rounds(calls, 2)
            row = dict(
                dtype=dtype,
                T=T,
                bytes=nbytes,
                copy_gbs=copy,
                same=same,
                kernels={},
            )
            for k in calls:
                ms = statistics.mean(times[k])
                row["kernels"][k] = dict(
                    ms=ms, frac_copy=traffic.frac_copy(nbytes, ms, copy)
                )
            meta["rows"].append(row)
            print(
                "%s: %s T=%d copy %.0f GB/s: %s; same as flexsn: %s"
                % (
                    PROG,
                    dtype,
                    T,
                    copy,
                    ", ".join(
                        "%s %.1f%%" % (k, 100 * r["frac_copy"])
                        for k, r in row["kernels"].items()
                    ),
                    same,
                )
            )
            sys.stdout.flush()
            del calls, s, v, x, want
            timer.free()
    results.write_results(args.out, "schedule_results", meta, markdown(meta))
    print("%s: results in %s" % (PROG, args.out))
    return 0


def markdown(meta):
    rows = meta["rows"]
    names = list(rows[0]["kernels"])
    heads = ["%s T=%d" % (r["dtype"], r["T"]) for r in rows]
    lines = [
        "# LIF inference: the recurrence's address order",
        "",
        "`python3 -m bench schedule` on %s (torch %s), N = 2^%d, "
        "3 T N elements per call (x read; spike and v_seq written; v_init "
        "NULL). %% of the copy bandwidth measured just before each column "
        "(%s GB/s); mean of two medians of 20 CUDA-event timings. What "
        "each row is: the benchmark's docstring (bench/schedule.py)."
        % (
            meta["device"],
            meta["torch"],
            meta["N"].bit_length() - 1,
            ", ".join("%.0f" % r["copy_gbs"] for r in rows),
        ),
        "",
        "| kernel | " + " | ".join(heads) + " |",
        "|---" * (len(heads) + 1) + "|",
    ]
    for k in names:
        lines.append(
            "| %s | " % k
            + " | ".join(
                "%.1f" % (100 * r["kernels"][k]["frac_copy"]) for r in rows
            )
            + " |"
        )
    lines.append("")
    lines.append(
        "Hand-written kernels write flexsn's spikes and v bitwise: "
        + (
            ", ".join(
                "%s %s"
                % (k, "yes" if all(r["same"][k] for r in rows) else "NO")
                for k in rows[0]["same"]
            )
            or "not run"
        )
        + "."
    )
    return "\n".join(lines) + "\n"
