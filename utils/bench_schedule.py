#!/usr/bin/env python3
"""Where the inference kernel's gap to the same-mix stream comes from.

    python3 utils/bench_schedule.py [--out DIR]

FlexSN's kernels give each thread a group of neurons and run the whole time
loop in that thread, so at any moment the blocks in flight read and write
rows at different steps t of each [T, N] array. This script separates the
address order that schedule produces from everything else. For LIF
inference (x in, spike and v_seq out; v_init NULL, so 3 T N elements
move), f32 and f16, T in {4, 16, 64}, N = 2^24, it times on the same
buffers, in turn twice, against a copy measured just before each group:

- flexsn: the shipped kernel (`flexsn.compile("lif")`, as bench_lif.py);
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
"""

import argparse
import os
import statistics
import sys

from bench_placement import copy_gbs, load_bench, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

N = 1 << 24
TS = (4, 16, 64)
DTYPES = ("f32", "f16")
BANDS = (256, 1024, 4096)
PACING = (8, 32)
BLOCKS_PER_SM = 8

# LIF (tau = 2, v_th = 1, hard reset to 0) as lib/Neurons/lif.mlir's
# defaults; a vector is 16 bytes (4 f32 or 8 f16 neurons), converted with
# PTX cvt so that no header is needed.
SOURCE = r'''
struct F32 {
  typedef float4 V;
  enum { W = 4 };
  static __device__ void get(V v, float *f) { f[0] = v.x; f[1] = v.y; f[2] = v.z; f[3] = v.w; }
  static __device__ V put(const float *f) { return make_float4(f[0], f[1], f[2], f[3]); }
};
struct F16 {
  typedef uint4 V;
  enum { W = 8 };
  static __device__ void get(V v, float *f) {
    const unsigned short *h = reinterpret_cast<const unsigned short *>(&v);
    for (int k = 0; k < 8; ++k) asm("cvt.f32.f16 %0, %1;" : "=f"(f[k]) : "h"(h[k]));
  }
  static __device__ V put(const float *f) {
    V v;
    unsigned short *h = reinterpret_cast<unsigned short *>(&v);
    for (int k = 0; k < 8; ++k) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h[k]) : "f"(f[k]));
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

#define KERNELS(E, e)                                                          \
  extern "C" __global__ void __launch_bounds__(256, 8) thread_loop_##e(        \
      const E::V *x, E::V *s, E::V *v, long long T, long long g) {             \
    thread_loop<E, false>(x, s, v, T, g);                                      \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(256, 8) block_sync_##e(         \
      const E::V *x, E::V *s, E::V *v, long long T, long long g) {             \
    thread_loop<E, true>(x, s, v, T, g);                                       \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(256, 8) paced_##e(              \
      const E::V *x, E::V *s, E::V *v, long long T, long long g,               \
      unsigned *ctr, long long D) {                                            \
    paced<E>(x, s, v, T, g, ctr, D);                                           \
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
'''


def kernel_calls(torch, cp, module, lif, bench, dtype, T):
    """{name: launch} on one set of buffers, and (outputs per hand-written
    kernel, flexsn's) for the equality check."""
    es = bench.ELEM[dtype]
    tdt = bench.tdtypes(torch)[dtype]
    x, _, _ = bench.make_inputs(torch, "inference", dtype, T, N)
    s = torch.empty((T, N), dtype=tdt, device="cuda")
    v = torch.empty_like(s)
    ext = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    handle = torch.cuda.current_stream().cuda_stream
    ptr = [cp.uint64(t.data_ptr()) for t in (x, s, v)]
    groups = N * es // 16
    grid = ((groups + 255) // 256,)
    calls = {}

    kf = lif.kernel("cuda", "inference", dtype)
    pf = bench.addresses(kf, {"x": x, "spike": s, "v_seq": v})
    calls["flexsn"] = lambda: kf.launch(handle, T, N, 0, pf, 0)
    for name in ("thread_loop", "block_sync"):
        f = module.get_function("%s_%s" % (name, dtype))
        calls[name] = (lambda f=f: f(grid, (256,), (
            ptr[0], ptr[1], ptr[2], cp.int64(T), cp.int64(groups)),
            stream=ext))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    G = BLOCKS_PER_SM * sms
    rounds = (groups + 256 * G - 1) // (256 * G)
    ctr = torch.zeros(rounds * T, dtype=torch.int32, device="cuda")
    f = module.get_function("paced_%s" % dtype)
    for D in PACING:
        def paced(f=f, D=D):
            ctr.zero_()
            f((G,), (256,), (ptr[0], ptr[1], ptr[2], cp.int64(T),
                             cp.int64(groups), cp.uint64(ctr.data_ptr()),
                             cp.int64(D)), stream=ext)
        calls["paced_D%d" % D] = paced

    stream = module.get_function("stream_order")
    chunks = groups // 256

    def order(band, blocks):
        return lambda: stream((blocks,), (256,), (
            ptr[0], ptr[1], ptr[2], cp.int64(T), cp.int64(chunks),
            cp.int64(band)), stream=ext)
    calls["stream"] = order(0, T * chunks)
    calls["stream_chunk_major"] = order(-1, T * chunks)
    for band in BANDS:
        calls["stream_band_%d" % band] = order(
            band, (chunks + band - 1) // band * band * T)
    return calls, (s, v), x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="schedule-out")
    args = ap.parse_args()
    import torch
    import cupy as cp
    import flexsn
    bench = load_bench()
    lif = flexsn.compile("lif", **bench.LIF_COMPILE)
    module = cp.RawModule(code=SOURCE, options=("-std=c++11", "--fmad=false"))
    timer = bench.Timer(torch, 20, 3)
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                N=N, rows=[])
    print("bench_schedule: %s" % meta["device"])
    for dtype in DTYPES:
        for T in TS:
            calls, (s, v), x = kernel_calls(torch, cp, module, lif, bench,
                                            dtype, T)
            nbytes = 3 * T * N * bench.ELEM[dtype]
            calls["flexsn"]()
            want = (s.clone(), v.clone())
            same = {}
            for name in ("thread_loop", "block_sync") + tuple(
                    "paced_D%d" % d for d in PACING):
                s.fill_(float("nan"))
                v.fill_(float("nan"))
                calls[name]()
                torch.cuda.synchronize()
                same[name] = bool(torch.equal(s, want[0])
                                  and torch.equal(v, want[1]))
            copy = copy_gbs(torch, bench, timer)
            times = {k: [] for k in calls}
            for _ in range(2):
                for k, fn in calls.items():
                    times[k].append(timer.gpu_ms(fn)[0])
            row = dict(dtype=dtype, T=T, bytes=nbytes, copy_gbs=copy,
                       same=same, kernels={})
            for k in calls:
                ms = statistics.mean(times[k])
                row["kernels"][k] = dict(
                    ms=ms, frac_copy=nbytes / (ms * 1e-3) / 1e9 / copy)
            meta["rows"].append(row)
            print("bench_schedule: %s T=%d copy %.0f GB/s: %s; same as "
                  "flexsn: %s" % (dtype, T, copy, ", ".join(
                      "%s %.1f%%" % (k, 100 * r["frac_copy"])
                      for k, r in row["kernels"].items()), same))
            sys.stdout.flush()
            del calls, s, v, x, want
            torch.cuda.empty_cache()
    write_results(args.out, "schedule_results", meta, markdown(meta))
    return 0


def markdown(meta):
    rows = meta["rows"]
    names = list(rows[0]["kernels"])
    heads = ["%s T=%d" % (r["dtype"], r["T"]) for r in rows]
    lines = [
        "# LIF inference: the recurrence's address order",
        "",
        "`python3 utils/bench_schedule.py` on %s (torch %s), N = 2^%d, "
        "3 T N elements per call (x read; spike and v_seq written; v_init "
        "NULL). %% of the copy bandwidth measured just before each column "
        "(%s GB/s); mean of two medians of 20 CUDA-event timings. What "
        "each row is: the script's docstring." % (
            meta["device"], meta["torch"], N.bit_length() - 1,
            ", ".join("%.0f" % r["copy_gbs"] for r in rows)),
        "",
        "| kernel | " + " | ".join(heads) + " |",
        "|---" * (len(heads) + 1) + "|",
    ]
    for k in names:
        lines.append("| %s | " % k + " | ".join(
            "%.1f" % (100 * r["kernels"][k]["frac_copy"]) for r in rows)
            + " |")
    lines.append("")
    lines.append("Hand-written kernels write flexsn's spikes and v bitwise: "
                 + ", ".join("%s %s" % (k, "yes" if all(
                     r["same"][k] for r in rows) else "NO")
                     for k in rows[0]["same"]) + ".")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
