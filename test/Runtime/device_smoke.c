/*===- device_smoke.c - FlexSN runtime checks on a real GPU --------------===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * Exercises the driver-side paths of the runtime (lib/Runtime) on a machine
 * with a GPU (not run in CI): NO_CONTEXT, CONTEXT_MISMATCH, BUFFER_TOO_SMALL,
 * MODULE_LOAD, KERNEL_NOT_FOUND, the T == 0 final-state copy, real launches of
 * the vector and the scalar kernel on device, managed, pinned, registered and
 * memory-pool buffers, per-context loading (including a destroyed context
 * whose handle may be reused) and unloading. Prints one line per check; exits
 * non-zero if any fails.
 *
 *   gcc -std=c99 -I/usr/local/cuda/include -Iinclude \
 *       test/Runtime/device_smoke.c lib/Runtime/flexsn_runtime.c \
 *       lib/Runtime/flexsn_runtime_cuda.c \
 *       -L/usr/local/cuda/lib64/stubs -lcuda -ldl -lpthread
 *
 *===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L

#include "flexsn/Runtime/flexsn_runtime.h"

#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Two kernels with the kernel ABI of a one-state neuron (docs/ABI.md):
   x[T,N], v0[N], out[T,N], v_final[N], T, N, ld, scale;
   v <- v + scale * x[t]; out[t] = v; v_final = v. From this CUDA source, by
   `nvcc -ptx -arch=compute_75 -O3` (comments dropped, .version lowered to 7.0
   so that older drivers JIT it too):

   extern "C" __global__ void smoke_f32(const float *x, const float *v0,
       float *out, float *vf, long long T, long long N, long long ld,
       float scale) {
     long long n = (long long)blockIdx.x * 256 + threadIdx.x;
     if (n >= N) return;
     float v = v0 ? v0[n] : 0.0f;
     #pragma unroll 1
     for (long long t = 0; t < T; ++t) {
       v += scale * x[t * ld + n];
       if (out) out[t * ld + n] = v;
     }
     if (vf) vf[n] = v;
   }
   smoke_f32_vec4: the same, four neurons per thread with float4 accesses
   (one at a time for the last, partial group). */
static const char k_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry smoke_f32(\n"
    " .param .u64 smoke_f32_param_0,\n"
    " .param .u64 smoke_f32_param_1,\n"
    " .param .u64 smoke_f32_param_2,\n"
    " .param .u64 smoke_f32_param_3,\n"
    " .param .u64 smoke_f32_param_4,\n"
    " .param .u64 smoke_f32_param_5,\n"
    " .param .u64 smoke_f32_param_6,\n"
    " .param .f32 smoke_f32_param_7\n"
    ")\n"
    "{\n"
    " .reg .pred  %p<8>;\n"
    " .reg .f32  %f<16>;\n"
    " .reg .b32  %r<3>;\n"
    " .reg .b64  %rd<43>;\n"
    " ld.param.u64  %rd23, [smoke_f32_param_0];\n"
    " ld.param.u64  %rd18, [smoke_f32_param_1];\n"
    " ld.param.u64  %rd19, [smoke_f32_param_2];\n"
    " ld.param.u64  %rd20, [smoke_f32_param_3];\n"
    " ld.param.u64  %rd21, [smoke_f32_param_4];\n"
    " ld.param.u64  %rd24, [smoke_f32_param_5];\n"
    " ld.param.u64  %rd22, [smoke_f32_param_6];\n"
    " ld.param.f32  %f8, [smoke_f32_param_7];\n"
    " cvta.to.global.u64  %rd1, %rd23;\n"
    " mov.u32  %r1, %ctaid.x;\n"
    " mul.wide.u32  %rd25, %r1, 256;\n"
    " mov.u32  %r2, %tid.x;\n"
    " cvt.u64.u32  %rd26, %r2;\n"
    " add.s64  %rd2, %rd25, %rd26;\n"
    " setp.ge.s64  %p1, %rd2, %rd24;\n"
    " @%p1 bra  $L__BB0_11;\n"
    " setp.eq.s64  %p2, %rd18, 0;\n"
    " mov.f32  %f15, 0f00000000;\n"
    " @%p2 bra  $L__BB0_3;\n"
    " cvta.to.global.u64  %rd27, %rd18;\n"
    " shl.b64  %rd28, %rd2, 2;\n"
    " add.s64  %rd29, %rd27, %rd28;\n"
    " ld.global.f32  %f15, [%rd29];\n"
    "$L__BB0_3:\n"
    " setp.lt.s64  %p3, %rd21, 1;\n"
    " @%p3 bra  $L__BB0_9;\n"
    " setp.eq.s64  %p4, %rd19, 0;\n"
    " @%p4 bra  $L__BB0_7;\n"
    " cvta.to.global.u64  %rd31, %rd19;\n"
    " shl.b64  %rd32, %rd2, 2;\n"
    " add.s64  %rd39, %rd31, %rd32;\n"
    " shl.b64  %rd4, %rd22, 2;\n"
    " add.s64  %rd38, %rd1, %rd32;\n"
    " mov.u64  %rd40, 0;\n"
    "$L__BB0_6:\n"
    " .pragma \"nounroll\";\n"
    " ld.global.f32  %f10, [%rd38];\n"
    " fma.rn.f32  %f15, %f10, %f8, %f15;\n"
    " st.global.f32  [%rd39], %f15;\n"
    " add.s64  %rd39, %rd39, %rd4;\n"
    " add.s64  %rd38, %rd38, %rd4;\n"
    " add.s64  %rd40, %rd40, 1;\n"
    " setp.lt.s64  %p5, %rd40, %rd21;\n"
    " @%p5 bra  $L__BB0_6;\n"
    " bra.uni  $L__BB0_9;\n"
    "$L__BB0_7:\n"
    " shl.b64  %rd34, %rd2, 2;\n"
    " add.s64  %rd41, %rd1, %rd34;\n"
    " shl.b64  %rd13, %rd22, 2;\n"
    " mov.u64  %rd42, 0;\n"
    "$L__BB0_8:\n"
    " .pragma \"nounroll\";\n"
    " ld.global.f32  %f11, [%rd41];\n"
    " fma.rn.f32  %f15, %f11, %f8, %f15;\n"
    " add.s64  %rd41, %rd41, %rd13;\n"
    " add.s64  %rd42, %rd42, 1;\n"
    " setp.lt.s64  %p6, %rd42, %rd21;\n"
    " @%p6 bra  $L__BB0_8;\n"
    "$L__BB0_9:\n"
    " setp.eq.s64  %p7, %rd20, 0;\n"
    " @%p7 bra  $L__BB0_11;\n"
    " cvta.to.global.u64  %rd35, %rd20;\n"
    " shl.b64  %rd36, %rd2, 2;\n"
    " add.s64  %rd37, %rd35, %rd36;\n"
    " st.global.f32  [%rd37], %f15;\n"
    "$L__BB0_11:\n"
    " ret;\n"
    "}\n"
    ".visible .entry smoke_f32_vec4(\n"
    " .param .u64 smoke_f32_vec4_param_0,\n"
    " .param .u64 smoke_f32_vec4_param_1,\n"
    " .param .u64 smoke_f32_vec4_param_2,\n"
    " .param .u64 smoke_f32_vec4_param_3,\n"
    " .param .u64 smoke_f32_vec4_param_4,\n"
    " .param .u64 smoke_f32_vec4_param_5,\n"
    " .param .u64 smoke_f32_vec4_param_6,\n"
    " .param .f32 smoke_f32_vec4_param_7\n"
    ")\n"
    "{\n"
    " .reg .pred  %p<24>;\n"
    " .reg .f32  %f<93>;\n"
    " .reg .b32  %r<4>;\n"
    " .reg .b64  %rd<94>;\n"
    " ld.param.u64  %rd37, [smoke_f32_vec4_param_0];\n"
    " ld.param.u64  %rd31, [smoke_f32_vec4_param_1];\n"
    " ld.param.u64  %rd32, [smoke_f32_vec4_param_2];\n"
    " ld.param.u64  %rd33, [smoke_f32_vec4_param_3];\n"
    " ld.param.u64  %rd34, [smoke_f32_vec4_param_4];\n"
    " ld.param.u64  %rd35, [smoke_f32_vec4_param_5];\n"
    " ld.param.u64  %rd36, [smoke_f32_vec4_param_6];\n"
    " ld.param.f32  %f40, [smoke_f32_vec4_param_7];\n"
    " cvta.to.global.u64  %rd1, %rd32;\n"
    " cvta.to.global.u64  %rd2, %rd37;\n"
    " cvta.to.global.u64  %rd3, %rd33;\n"
    " cvta.to.global.u64  %rd4, %rd31;\n"
    " mov.u32  %r1, %ctaid.x;\n"
    " mul.wide.u32  %rd38, %r1, 256;\n"
    " mov.u32  %r2, %tid.x;\n"
    " cvt.u64.u32  %rd39, %r2;\n"
    " add.s64  %rd40, %rd38, %rd39;\n"
    " shl.b64  %rd5, %rd40, 2;\n"
    " setp.ge.s64  %p1, %rd5, %rd35;\n"
    " @%p1 bra  $L__BB1_35;\n"
    " add.s64  %rd41, %rd5, 4;\n"
    " setp.gt.s64  %p2, %rd41, %rd35;\n"
    " @%p2 bra  $L__BB1_12;\n"
    " bra.uni  $L__BB1_2;\n"
    "$L__BB1_12:\n"
    " setp.eq.s64  %p9, %rd31, 0;\n"
    " @%p9 bra  $L__BB1_22;\n"
    "$L__BB1_13:\n"
    " .pragma \"nounroll\";\n"
    " shl.b64  %rd57, %rd5, 2;\n"
    " add.s64  %rd58, %rd4, %rd57;\n"
    " ld.global.f32  %f89, [%rd58];\n"
    " setp.lt.s64  %p10, %rd34, 1;\n"
    " @%p10 bra  $L__BB1_19;\n"
    " setp.eq.s64  %p11, %rd32, 0;\n"
    " @%p11 bra  $L__BB1_17;\n"
    " mov.u64  %rd86, 0;\n"
    "$L__BB1_16:\n"
    " .pragma \"nounroll\";\n"
    " mul.lo.s64  %rd60, %rd86, %rd36;\n"
    " add.s64  %rd61, %rd60, %rd5;\n"
    " shl.b64  %rd62, %rd61, 2;\n"
    " add.s64  %rd63, %rd2, %rd62;\n"
    " ld.global.f32  %f65, [%rd63];\n"
    " fma.rn.f32  %f89, %f65, %f40, %f89;\n"
    " add.s64  %rd64, %rd1, %rd62;\n"
    " st.global.f32  [%rd64], %f89;\n"
    " add.s64  %rd86, %rd86, 1;\n"
    " setp.lt.s64  %p12, %rd86, %rd34;\n"
    " @%p12 bra  $L__BB1_16;\n"
    " bra.uni  $L__BB1_19;\n"
    "$L__BB1_17:\n"
    " mov.u64  %rd87, 0;\n"
    "$L__BB1_18:\n"
    " .pragma \"nounroll\";\n"
    " mul.lo.s64  %rd66, %rd87, %rd36;\n"
    " add.s64  %rd67, %rd66, %rd5;\n"
    " shl.b64  %rd68, %rd67, 2;\n"
    " add.s64  %rd69, %rd2, %rd68;\n"
    " ld.global.f32  %f66, [%rd69];\n"
    " fma.rn.f32  %f89, %f66, %f40, %f89;\n"
    " add.s64  %rd87, %rd87, 1;\n"
    " setp.lt.s64  %p13, %rd87, %rd34;\n"
    " @%p13 bra  $L__BB1_18;\n"
    "$L__BB1_19:\n"
    " setp.eq.s64  %p14, %rd33, 0;\n"
    " @%p14 bra  $L__BB1_21;\n"
    " add.s64  %rd71, %rd3, %rd57;\n"
    " st.global.f32  [%rd71], %f89;\n"
    "$L__BB1_21:\n"
    " add.s64  %rd5, %rd5, 1;\n"
    " setp.lt.s64  %p15, %rd5, %rd35;\n"
    " @%p15 bra  $L__BB1_13;\n"
    " bra.uni  $L__BB1_35;\n"
    "$L__BB1_2:\n"
    " setp.eq.s64  %p3, %rd31, 0;\n"
    " mov.f32  %f83, 0f00000000;\n"
    " mov.f32  %f84, %f83;\n"
    " mov.f32  %f85, %f83;\n"
    " mov.f32  %f86, %f83;\n"
    " @%p3 bra  $L__BB1_4;\n"
    " shl.b64  %rd42, %rd5, 2;\n"
    " add.s64  %rd43, %rd4, %rd42;\n"
    " ld.global.v4.f32  {%f83, %f84, %f85, %f86}, [%rd43];\n"
    "$L__BB1_4:\n"
    " setp.lt.s64  %p4, %rd34, 1;\n"
    " @%p4 bra  $L__BB1_10;\n"
    " setp.eq.s64  %p5, %rd32, 0;\n"
    " @%p5 bra  $L__BB1_8;\n"
    " mov.u64  %rd83, 0;\n"
    "$L__BB1_7:\n"
    " .pragma \"nounroll\";\n"
    " mul.lo.s64  %rd45, %rd83, %rd36;\n"
    " add.s64  %rd46, %rd45, %rd5;\n"
    " shl.b64  %rd47, %rd46, 2;\n"
    " add.s64  %rd48, %rd2, %rd47;\n"
    " ld.global.v4.f32  {%f49, %f50, %f51, %f52}, [%rd48];\n"
    " fma.rn.f32  %f83, %f49, %f40, %f83;\n"
    " fma.rn.f32  %f84, %f50, %f40, %f84;\n"
    " fma.rn.f32  %f85, %f51, %f40, %f85;\n"
    " fma.rn.f32  %f86, %f52, %f40, %f86;\n"
    " add.s64  %rd49, %rd1, %rd47;\n"
    " st.global.v4.f32  [%rd49], {%f83, %f84, %f85, %f86};\n"
    " add.s64  %rd83, %rd83, 1;\n"
    " setp.lt.s64  %p6, %rd83, %rd34;\n"
    " @%p6 bra  $L__BB1_7;\n"
    " bra.uni  $L__BB1_10;\n"
    "$L__BB1_22:\n"
    " setp.gt.s64  %p16, %rd34, 0;\n"
    " @%p16 bra  $L__BB1_26;\n"
    " bra.uni  $L__BB1_23;\n"
    "$L__BB1_26:\n"
    " shl.b64  %rd18, %rd36, 2;\n"
    "$L__BB1_27:\n"
    " .pragma \"nounroll\";\n"
    " setp.eq.s64  %p19, %rd32, 0;\n"
    " @%p19 bra  $L__BB1_30;\n"
    " shl.b64  %rd75, %rd5, 2;\n"
    " add.s64  %rd91, %rd1, %rd75;\n"
    " add.s64  %rd90, %rd2, %rd75;\n"
    " mov.f32  %f92, 0f00000000;\n"
    " mov.u64  %rd92, 0;\n"
    "$L__BB1_29:\n"
    " .pragma \"nounroll\";\n"
    " ld.global.f32  %f68, [%rd90];\n"
    " fma.rn.f32  %f92, %f68, %f40, %f92;\n"
    " st.global.f32  [%rd91], %f92;\n"
    " add.s64  %rd91, %rd91, %rd18;\n"
    " add.s64  %rd90, %rd90, %rd18;\n"
    " add.s64  %rd92, %rd92, 1;\n"
    " setp.lt.s64  %p20, %rd92, %rd34;\n"
    " @%p20 bra  $L__BB1_29;\n"
    " bra.uni  $L__BB1_32;\n"
    "$L__BB1_30:\n"
    " mov.f32  %f92, 0f00000000;\n"
    " mov.u64  %rd93, 0;\n"
    "$L__BB1_31:\n"
    " .pragma \"nounroll\";\n"
    " mul.lo.s64  %rd77, %rd93, %rd36;\n"
    " add.s64  %rd78, %rd77, %rd5;\n"
    " shl.b64  %rd79, %rd78, 2;\n"
    " add.s64  %rd80, %rd2, %rd79;\n"
    " ld.global.f32  %f70, [%rd80];\n"
    " fma.rn.f32  %f92, %f70, %f40, %f92;\n"
    " add.s64  %rd93, %rd93, 1;\n"
    " setp.lt.s64  %p21, %rd93, %rd34;\n"
    " @%p21 bra  $L__BB1_31;\n"
    "$L__BB1_32:\n"
    " setp.eq.s64  %p22, %rd33, 0;\n"
    " @%p22 bra  $L__BB1_34;\n"
    " shl.b64  %rd81, %rd5, 2;\n"
    " add.s64  %rd82, %rd3, %rd81;\n"
    " st.global.f32  [%rd82], %f92;\n"
    "$L__BB1_34:\n"
    " add.s64  %rd5, %rd5, 1;\n"
    " setp.lt.s64  %p23, %rd5, %rd35;\n"
    " @%p23 bra  $L__BB1_27;\n"
    " bra.uni  $L__BB1_35;\n"
    "$L__BB1_23:\n"
    " .pragma \"nounroll\";\n"
    " setp.eq.s64  %p17, %rd33, 0;\n"
    " @%p17 bra  $L__BB1_25;\n"
    " shl.b64  %rd72, %rd5, 2;\n"
    " add.s64  %rd73, %rd3, %rd72;\n"
    " mov.u32  %r3, 0;\n"
    " st.global.u32  [%rd73], %r3;\n"
    "$L__BB1_25:\n"
    " add.s64  %rd5, %rd5, 1;\n"
    " setp.lt.s64  %p18, %rd5, %rd35;\n"
    " @%p18 bra  $L__BB1_23;\n"
    " bra.uni  $L__BB1_35;\n"
    "$L__BB1_8:\n"
    " mov.u64  %rd84, 0;\n"
    "$L__BB1_9:\n"
    " .pragma \"nounroll\";\n"
    " mul.lo.s64  %rd51, %rd84, %rd36;\n"
    " add.s64  %rd52, %rd51, %rd5;\n"
    " shl.b64  %rd53, %rd52, 2;\n"
    " add.s64  %rd54, %rd2, %rd53;\n"
    " ld.global.v4.f32  {%f57, %f58, %f59, %f60}, [%rd54];\n"
    " fma.rn.f32  %f83, %f57, %f40, %f83;\n"
    " fma.rn.f32  %f84, %f58, %f40, %f84;\n"
    " fma.rn.f32  %f85, %f59, %f40, %f85;\n"
    " fma.rn.f32  %f86, %f60, %f40, %f86;\n"
    " add.s64  %rd84, %rd84, 1;\n"
    " setp.lt.s64  %p7, %rd84, %rd34;\n"
    " @%p7 bra  $L__BB1_9;\n"
    "$L__BB1_10:\n"
    " setp.eq.s64  %p8, %rd33, 0;\n"
    " @%p8 bra  $L__BB1_35;\n"
    " shl.b64  %rd55, %rd5, 2;\n"
    " add.s64  %rd56, %rd3, %rd55;\n"
    " st.global.v4.f32  [%rd56], {%f83, %f84, %f85, %f86};\n"
    "$L__BB1_35:\n"
    " ret;\n"
    "}\n";

enum { T_STEPS = 5, N = 3001, LD_MAX = 3008 };
#define SEQ_ELEMS (T_STEPS * LD_MAX + 4) /* room for a one-element offset */
#define STATE_ELEMS (LD_MAX + 4)

static const float k_scale = 0.5f;
static const flexsn_buffer_kind k_kinds[4] = {
    FLEXSN_INPUT_SEQUENCE, FLEXSN_INITIAL_STATE, FLEXSN_OUTPUT_SEQUENCE,
    FLEXSN_FINAL_STATE};
static const flexsn_kernel_desc k_desc = {
    "smoke_f32_vec4", "smoke_f32", 4, 4, 4, k_kinds, 1};
static flexsn_image g_image =
    FLEXSN_IMAGE_INIT((const unsigned char *)k_ptx, sizeof k_ptx);

static float g_hx[SEQ_ELEMS], g_hv0[STATE_ELEMS];
static int g_failures;

static void cu(CUresult r, const char *call, int line) {
  const char *name = NULL;
  if (r == CUDA_SUCCESS)
    return;
  cuGetErrorName(r, &name);
  printf("FAIL  line %d: %s -> %s\n", line, call, name ? name : "?");
  exit(2);
}
#define CU(call) cu((call), #call, __LINE__)

static void report(const char *what, flexsn_status got, flexsn_status want) {
  int ok = got == want;
  g_failures += !ok;
  printf("%s  %-62s %s", ok ? "PASS" : "FAIL", what,
         flexsn_status_message(got));
  if (!ok)
    printf("  [wanted: %s; last CUDA error %d]", flexsn_status_message(want),
           flexsn_last_cuda_error());
  printf("\n");
}

static void report_bool(const char *what, int ok) {
  g_failures += !ok;
  printf("%s  %s\n", ok ? "PASS" : "FAIL", what);
}

static CUdeviceptr at(CUdeviceptr base, int64_t elements) {
  return base ? base + (CUdeviceptr)(elements * 4) : 0;
}

static flexsn_status launch_on(flexsn_image *image,
                               const flexsn_kernel_desc *desc, CUstream stream,
                               int64_t T, int64_t ld, CUdeviceptr x,
                               CUdeviceptr v0, CUdeviceptr out,
                               CUdeviceptr vf) {
  void *buffers[4];
  const void *scalars[1];
  buffers[0] = (void *)(uintptr_t)x;
  buffers[1] = (void *)(uintptr_t)v0;
  buffers[2] = (void *)(uintptr_t)out;
  buffers[3] = (void *)(uintptr_t)vf;
  scalars[0] = &k_scale;
  return flexsn_launch(image, desc, stream, T, N, ld, buffers, scalars);
}

static flexsn_status launch(int64_t T, int64_t ld, CUdeviceptr x,
                            CUdeviceptr v0, CUdeviceptr out, CUdeviceptr vf) {
  return launch_on(&g_image, &k_desc, NULL, T, ld, x, v0, out, vf);
}

/* Fills out/vf with NaN so that unwritten elements show. */
static void poison(CUdeviceptr out, CUdeviceptr vf) {
  if (out)
    CU(cuMemsetD32(out, 0x7fc00000u, T_STEPS * LD_MAX));
  if (vf)
    CU(cuMemsetD32(vf, 0x7fc00000u, LD_MAX));
}

/* Reports `status`, then (on success) compares out and vf with the host
   reference computed from x and v0 (host copies of what the kernel read). */
static void check_run(const char *what, flexsn_status status, int64_t T,
                      int64_t ld, const float *x, const float *v0,
                      CUdeviceptr out, CUdeviceptr vf) {
  static float hout[SEQ_ELEMS], hvf[STATE_ELEMS];
  int64_t t, n;
  int ok = 1;
  report(what, status, FLEXSN_SUCCESS);
  if (status != FLEXSN_SUCCESS)
    return;
  CU(cuCtxSynchronize());
  if (out)
    CU(cuMemcpy((CUdeviceptr)(uintptr_t)hout, out,
                (size_t)((T - 1) * ld + N) * 4));
  if (vf)
    CU(cuMemcpy((CUdeviceptr)(uintptr_t)hvf, vf, N * 4));
  for (n = 0; n < N && ok; ++n) {
    float v = v0 ? v0[n] : 0.0f;
    for (t = 0; t < T; ++t) {
      v += k_scale * x[t * ld + n];
      ok &= !out || hout[t * ld + n] == v;
    }
    ok &= !vf || hvf[n] == v;
  }
  report_bool("  ... results match the host reference", ok);
}

int main(void) {
  CUdevice dev;
  CUcontext primary, ctx2, ctx3, popped;
  CUstream stream, stream2;
  CUdeviceptr dx, dv0, dout, dvf, dsmall, dsmall_state, d2x, d2out, d3x, d3out,
      mx, mout, px, pool_x, pool_out;
  float *host = (float *)malloc(SEQ_ELEMS * 4), *registered, *pinned;
  char name[256];
  int version = 0, can_use_host_ptr = 0, i;
  static const unsigned char garbage[] = "definitely not a cubin or PTX";
  flexsn_image garbage_image = FLEXSN_IMAGE_INIT(garbage, sizeof garbage);
  flexsn_kernel_desc no_vector = k_desc, no_scalar = k_desc;
  no_vector.vector_kernel = "no_such_kernel";
  no_scalar.scalar_kernel = "no_such_kernel";

  for (i = 0; i < SEQ_ELEMS; ++i)
    g_hx[i] = (float)((i * 7) % 11 - 5);
  for (i = 0; i < STATE_ELEMS; ++i)
    g_hv0[i] = (float)(i % 5);

  /* No context yet: the runtime initializes the driver itself. */
  report("no current context", launch(T_STEPS, 0, 0x100000, 0, 0, 0),
         FLEXSN_ERROR_NO_CONTEXT);

  CU(cuInit(0));
  CU(cuDriverGetVersion(&version));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDeviceGetName(name, sizeof name, dev));
  CU(cuDeviceGetAttribute(
      &can_use_host_ptr,
      CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, dev));
  printf("info  driver %d, device %s, host pointer usable for registered "
         "memory: %d\n",
         version, name, can_use_host_ptr);
  CU(cuDevicePrimaryCtxRetain(&primary, dev));
  CU(cuCtxSetCurrent(primary));
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  CU(cuMemAlloc(&dx, SEQ_ELEMS * 4));
  CU(cuMemAlloc(&dv0, STATE_ELEMS * 4));
  CU(cuMemAlloc(&dout, SEQ_ELEMS * 4));
  CU(cuMemAlloc(&dvf, STATE_ELEMS * 4));
  CU(cuMemcpyHtoD(dx, g_hx, sizeof g_hx));
  CU(cuMemcpyHtoD(dv0, g_hv0, sizeof g_hv0));

  /* Kernel selection and results. */
  poison(dout, dvf);
  check_run("vector kernel (aligned, ld % 4 == 0)",
            launch(T_STEPS, 3004, dx, dv0, dout, dvf), T_STEPS, 3004, g_hx,
            g_hv0, dout, dvf);
  poison(dout, dvf);
  check_run("scalar kernel (ld % 4 != 0)",
            launch(T_STEPS, 3001, dx, dv0, dout, dvf), T_STEPS, 3001, g_hx,
            g_hv0, dout, dvf);
  poison(dout, dvf);
  check_run(
      "scalar kernel (buffers 4-byte aligned only)",
      launch(T_STEPS, 3004, at(dx, 1), at(dv0, 1), at(dout, 1), at(dvf, 1)),
      T_STEPS, 3004, g_hx + 1, g_hv0 + 1, at(dout, 1), at(dvf, 1));
  poison(dout, dvf);
  check_run("absent initial state and output (ld 0 = N)",
            launch(T_STEPS, 0, dx, 0, 0, dvf), T_STEPS, N, g_hx, NULL, 0, dvf);
  poison(dout, dvf);
  check_run(
      "on a stream of the current context",
      launch_on(&g_image, &k_desc, stream, T_STEPS, 3004, dx, dv0, dout, dvf),
      T_STEPS, 3004, g_hx, g_hv0, dout, dvf);
  poison(dout, dvf);
  check_run("on CU_STREAM_PER_THREAD",
            launch_on(&g_image, &k_desc, CU_STREAM_PER_THREAD, T_STEPS, 3004,
                      dx, dv0, dout, dvf),
            T_STEPS, 3004, g_hx, g_hv0, dout, dvf);

  /* Missing entries and bad images. */
  report(
      "vector entry missing",
      launch_on(&g_image, &no_vector, NULL, T_STEPS, 3004, dx, dv0, dout, dvf),
      FLEXSN_ERROR_KERNEL_NOT_FOUND);
  poison(dout, dvf);
  check_run(
      "vector entry missing, scalar kernel chosen",
      launch_on(&g_image, &no_vector, NULL, T_STEPS, 3001, dx, dv0, dout, dvf),
      T_STEPS, 3001, g_hx, g_hv0, dout, dvf);
  report(
      "scalar entry missing",
      launch_on(&g_image, &no_scalar, NULL, T_STEPS, 3001, dx, dv0, dout, dvf),
      FLEXSN_ERROR_KERNEL_NOT_FOUND);
  report(
      "garbage image bytes",
      launch_on(&garbage_image, &k_desc, NULL, T_STEPS, 0, dx, dv0, dout, dvf),
      FLEXSN_ERROR_MODULE_LOAD);
  printf("info  last CUDA error after the garbage image: %d\n",
         flexsn_last_cuda_error());
  report("unload of the image that never loaded",
         flexsn_image_unload(&garbage_image), FLEXSN_SUCCESS);

  /* Memory the kernels cannot use, or too small. */
  report("host (malloc) pointer as input",
         launch(T_STEPS, 0, (CUdeviceptr)(uintptr_t)host, dv0, dout, dvf),
         FLEXSN_ERROR_CONTEXT_MISMATCH);
  report("host (malloc) pointer as final state",
         launch(T_STEPS, 0, dx, dv0, dout, (CUdeviceptr)(uintptr_t)host),
         FLEXSN_ERROR_CONTEXT_MISMATCH);
  CU(cuMemAlloc(&dsmall, ((size_t)T_STEPS * N - 1) * 4));
  CU(cuMemAlloc(&dsmall_state, (N - 1) * 4));
  report("input allocation one element short",
         launch(T_STEPS, 0, dsmall, dv0, dout, dvf),
         FLEXSN_ERROR_BUFFER_TOO_SMALL);
  report("final-state allocation one element short",
         launch(T_STEPS, 0, dx, dv0, dout, dsmall_state),
         FLEXSN_ERROR_BUFFER_TOO_SMALL);
  report("output ending one element past its allocation",
         launch(T_STEPS, 3004, dx, dv0,
                at(dout, SEQ_ELEMS - ((T_STEPS - 1) * 3004 + N) + 1), dvf),
         FLEXSN_ERROR_BUFFER_TOO_SMALL);
  poison(dout, dvf);
  check_run("output ending exactly at its allocation",
            launch(T_STEPS, 3004, dx, dv0,
                   at(dout, SEQ_ELEMS - ((T_STEPS - 1) * 3004 + N)), dvf),
            T_STEPS, 3004, g_hx, g_hv0,
            at(dout, SEQ_ELEMS - ((T_STEPS - 1) * 3004 + N)), dvf);

  /* T == 0: final = initial, nothing else written. */
  {
    static float hvf[STATE_ELEMS];
    uint32_t sentinel = 0;
    int ok = 1;
    poison(dout, dvf);
    report("T == 0 copies the initial state", launch(0, 0, dx, dv0, dout, dvf),
           FLEXSN_SUCCESS);
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(hvf, dvf, sizeof hvf));
    for (i = 0; i < N; ++i)
      ok &= hvf[i] == g_hv0[i];
    memcpy(&sentinel, &hvf[N], 4);
    ok &= sentinel == 0x7fc00000u;
    report_bool("  ... final state == initial state, nothing past N", ok);
    CU(cuMemcpyDtoH(&sentinel, dout, 4));
    report_bool("  ... output untouched", sentinel == 0x7fc00000u);

    report("T == 0 without initial state zero-fills",
           launch(0, 0, dx, 0, dout, dvf), FLEXSN_SUCCESS);
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(hvf, dvf, sizeof hvf));
    ok = 1;
    for (i = 0; i < N; ++i)
      ok &= hvf[i] == 0.0f;
    report_bool("  ... final state == 0", ok);

    report("T == 0 with the state in place", launch(0, 0, dx, dv0, dout, dv0),
           FLEXSN_SUCCESS);
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(hvf, dv0, sizeof hvf));
    report_bool("  ... state unchanged",
                memcmp(hvf, g_hv0, N * sizeof(float)) == 0);
    report("T == 0, final-state allocation one element short",
           launch(0, 0, dx, dv0, dout, dsmall_state),
           FLEXSN_ERROR_BUFFER_TOO_SMALL);
    report("T == 0, host pointer as initial state",
           launch(0, 0, dx, (CUdeviceptr)(uintptr_t)host, dout, dvf),
           FLEXSN_ERROR_CONTEXT_MISMATCH);
  }

  /* Other memory kernels can use. */
  CU(cuMemAllocManaged(&mx, SEQ_ELEMS * 4, CU_MEM_ATTACH_GLOBAL));
  CU(cuMemAllocManaged(&mout, SEQ_ELEMS * 4, CU_MEM_ATTACH_GLOBAL));
  memcpy((void *)(uintptr_t)mx, g_hx, sizeof g_hx);
  check_run("managed memory", launch(T_STEPS, 3004, mx, dv0, mout, dvf),
            T_STEPS, 3004, g_hx, g_hv0, mout, dvf);
  CU(cuMemHostAlloc((void **)&pinned, SEQ_ELEMS * 4,
                    CU_MEMHOSTALLOC_DEVICEMAP));
  check_run("pinned host memory (cuMemHostAlloc) as output",
            launch(T_STEPS, 3004, dx, dv0, (CUdeviceptr)(uintptr_t)pinned, dvf),
            T_STEPS, 3004, g_hx, g_hv0, (CUdeviceptr)(uintptr_t)pinned, dvf);
  if (posix_memalign((void **)&registered, 4096, SEQ_ELEMS * 4) != 0)
    return 2;
  CU(cuMemHostRegister(registered, SEQ_ELEMS * 4,
                       CU_MEMHOSTREGISTER_DEVICEMAP));
  memcpy(registered, g_hx, sizeof g_hx);
  px = (CUdeviceptr)(uintptr_t)registered;
  if (can_use_host_ptr)
    check_run("registered host memory as input",
              launch(T_STEPS, 3004, px, dv0, dout, dvf), T_STEPS, 3004, g_hx,
              g_hv0, dout, dvf);
  else
    report("registered host memory at another device address",
           launch(T_STEPS, 3004, px, dv0, dout, dvf),
           FLEXSN_ERROR_CONTEXT_MISMATCH);
  CU(cuMemAllocAsync(&pool_x, SEQ_ELEMS * 4, stream));
  CU(cuMemAllocAsync(&pool_out, SEQ_ELEMS * 4, stream));
  CU(cuMemcpyHtoDAsync(pool_x, g_hx, sizeof g_hx, stream));
  CU(cuStreamSynchronize(stream));
  check_run("memory-pool allocations (cuMemAllocAsync)",
            launch_on(&g_image, &k_desc, stream, T_STEPS, 3004, pool_x, dv0,
                      pool_out, dvf),
            T_STEPS, 3004, g_hx, g_hv0, pool_out, dvf);

  /* A second context: its memory and streams are foreign here. */
  CU(cuCtxCreate(&ctx2, NULL, 0, dev)); /* pushed: now current */
  CU(cuMemAlloc(&d2x, SEQ_ELEMS * 4));
  CU(cuMemAlloc(&d2out, SEQ_ELEMS * 4));
  CU(cuMemcpyHtoD(d2x, g_hx, sizeof g_hx));
  CU(cuStreamCreate(&stream2, CU_STREAM_DEFAULT));
  check_run("launch in a second context (loads the image there)",
            launch(T_STEPS, 3004, d2x, 0, d2out, 0), T_STEPS, 3004, g_hx, NULL,
            d2out, 0);
  report("first context's buffer in the second context",
         launch(T_STEPS, 3004, dx, 0, d2out, 0), FLEXSN_ERROR_CONTEXT_MISMATCH);
  CU(cuCtxPopCurrent(&popped));
  report("second context's buffer as output",
         launch(T_STEPS, 3004, dx, dv0, d2out, dvf),
         FLEXSN_ERROR_CONTEXT_MISMATCH);
  report(
      "second context's stream",
      launch_on(&g_image, &k_desc, stream2, T_STEPS, 3004, dx, dv0, dout, dvf),
      FLEXSN_ERROR_CONTEXT_MISMATCH);

  /* Destroy the second context; a third may reuse its handle and must get a
     module of its own. */
  CU(cuStreamDestroy(stream2));
  CU(cuCtxDestroy(ctx2));
  CU(cuCtxCreate(&ctx3, NULL, 0, dev));
  printf("info  new context %s the destroyed one's handle\n",
         ctx3 == ctx2 ? "reuses" : "does not reuse");
  CU(cuMemAlloc(&d3x, SEQ_ELEMS * 4));
  CU(cuMemAlloc(&d3out, SEQ_ELEMS * 4));
  CU(cuMemcpyHtoD(d3x, g_hx, sizeof g_hx));
  check_run("launch in a third context after the second was destroyed",
            launch(T_STEPS, 3004, d3x, 0, d3out, 0), T_STEPS, 3004, g_hx, NULL,
            d3out, 0);
  CU(cuCtxPopCurrent(&popped));
  report("unload (a destroyed context skipped)", flexsn_image_unload(&g_image),
         FLEXSN_SUCCESS);
  report("unload again", flexsn_image_unload(&g_image), FLEXSN_SUCCESS);
  poison(dout, dvf);
  check_run("launch after unload (loads again)",
            launch(T_STEPS, 3004, dx, dv0, dout, dvf), T_STEPS, 3004, g_hx,
            g_hv0, dout, dvf);
  CU(cuCtxDestroy(ctx3));
  CU(cuCtxSetCurrent(primary));

  /* Host-side cost of a launch, for information. */
  {
    struct timespec t0, t1;
    const int reps = 20000;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < reps; ++i)
      if (launch_on(&g_image, &k_desc, stream, 1, 0, dx, dv0, dout, dvf) !=
          FLEXSN_SUCCESS)
        break;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CU(cuStreamSynchronize(stream));
    report_bool("repeated launches", i == reps);
    printf("info  %.2f us per flexsn_launch (host side, T=1, N=%d)\n",
           ((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
            (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
               reps,
           N);
  }

  report("final unload", flexsn_image_unload(&g_image), FLEXSN_SUCCESS);
  CU(cuMemFreeAsync(pool_x, stream));
  CU(cuMemFreeAsync(pool_out, stream));
  CU(cuStreamSynchronize(stream));
  CU(cuStreamDestroy(stream));
  CU(cuMemHostUnregister(registered));
  CU(cuMemFreeHost(pinned));
  CU(cuMemFree(mx));
  CU(cuMemFree(mout));
  CU(cuMemFree(dsmall));
  CU(cuMemFree(dsmall_state));
  CU(cuMemFree(dx));
  CU(cuMemFree(dv0));
  CU(cuMemFree(dout));
  CU(cuMemFree(dvf));
  CU(cuDevicePrimaryCtxRelease(dev));
  free(registered);
  free(host);

  printf("%s: %d check(s) failed\n", g_failures ? "FAILED" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
