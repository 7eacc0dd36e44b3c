/* Runs LIF and PLIF (w per channel) through the CPU header of
 * flexsn-translate --flexsn-to-host-header and the object file of
 * --flexsn-to-host-object, and checks them against the neurons' formulas,
 * written here independently (lib/Neurons/lif.mlir, plif.mlir: decay_input,
 * hard reset to 0, threshold 1, sigmoid surrogate with alpha = 4):
 *
 *   h = v + (x - v) * k,  s = (h >= 1),  v' = (1 - s) * h
 *   k = 1 / tau (LIF, tau = 2) or sigmoid(w[c]) (PLIF)
 *
 * and the reverse-time chain rule of that step for the gradients. Prints
 * one line per check passed; on a failure, a FAIL line and exit status 1. */

#include "lif_cpu.h"
#include "plif_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond) && ++failures <= 20) { /* the first 20 are enough */           \
      printf("FAIL line %d: ", __LINE__);                                      \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
    }                                                                          \
  } while (0)

static unsigned long long seed = 12345;
/* Uniform in [lo, hi), from a fixed-seed linear congruential generator. */
static float uniform(float lo, float hi) {
  seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (hi - lo) * (float)((seed >> 40) & 0xFFFFFF) / 16777216.0f;
}

static float *filled(size_t n, float lo, float hi) {
  float *a = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    a[i] = uniform(lo, hi);
  return a;
}

static float *poisoned(size_t n) {
  float *a = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    a[i] = NAN;
  return a;
}

static int close_to(float got, double want, double tolerance) {
  return fabs((double)got - want) <= tolerance * (1.0 + fabs(want));
}

/* The reference forward and backward of one neuron over T steps, with leak
 * k; gx, gv0 and *gk are its gradients for the incoming gs, gvs (per step,
 * NULL: zeros) and gvT (NULL: zero). Returns 0 when some h lies within
 * 1e-4 of the threshold (float rounding could then flip the spike). */
static int reference(int64_t T, int64_t N, int64_t n, const float *x, float v0,
                     double k, double *spikes, double *vs, const float *gs,
                     const float *gvs, const float *gvT, double *gx,
                     double *gv0, double *gk) {
  double h[64], vprev[64];
  double v = v0;
  int clear = 1;
  for (int64_t t = 0; t < T; ++t) {
    double xt = x[t * N + n];
    vprev[t] = v;
    h[t] = v + (xt - v) * k;
    double s = h[t] >= 1.0 ? 1.0 : 0.0;
    clear &= fabs(h[t] - 1.0) > 1e-4;
    v = (1.0 - s) * h[t];
    spikes[t] = s;
    vs[t] = v;
  }
  if (!gx)
    return clear;
  double gv = gvT ? gvT[n] : 0.0;
  *gk = 0.0;
  for (int64_t t = T - 1; t >= 0; --t) {
    if (gvs)
      gv += gvs[t * N + n];
    double sig = 1.0 / (1.0 + exp(-4.0 * (h[t] - 1.0)));
    double sg = 4.0 * sig * (1.0 - sig);
    double s = h[t] >= 1.0 ? 1.0 : 0.0;
    double gh = (gs ? gs[t * N + n] : 0.0) * sg + gv * ((1.0 - s) - h[t] * sg);
    gx[t] = gh * k;
    *gk += gh * (x[t * N + n] - vprev[t]);
    gv = gh * (1.0 - k);
  }
  *gv0 = gv;
  return clear;
}

/* LIF f32: inference, final state and training against the formulas;
 * thread counts; the argument checks. */
static void check_lif(void) {
  const int64_t T = 7, N = 9000; /* N spans three 4096-neuron chunks */
  const size_t TN = (size_t)(T * N);
  float *x = filled(TN, -0.5f, 2.5f), *v0 = filled(N, -0.5f, 0.9f);
  float *spike = poisoned(TN), *v_seq = poisoned(TN);
  CHECK(flexsn_cpu_lif_inference_f32(T, N, x, v0, spike, v_seq, 2) ==
            FLEXSN_SUCCESS,
        "inference status");
  float *spike_fs = poisoned(TN), *v_final = poisoned(N);
  CHECK(flexsn_cpu_lif_final_state_f32(T, N, x, v0, spike_fs, v_final, 0) ==
            FLEXSN_SUCCESS,
        "final-state status");

  size_t workspace_bytes = flexsn_cpu_lif_forward_f32_workspace_bytes(T, N);
  CHECK(workspace_bytes == flexsn_cpu_lif_backward_f32_workspace_bytes(T, N),
        "the training kernels report one workspace size");
  float *workspace = malloc(workspace_bytes);
  float *spike_tr = poisoned(TN), *v_seq_tr = poisoned(TN);
  CHECK(flexsn_cpu_lif_forward_f32(T, N, x, v0, spike_tr, v_seq_tr, workspace,
                                   2) == FLEXSN_SUCCESS,
        "forward status");
  float *gs = filled(TN, -1.0f, 1.0f), *gvs = filled(TN, -1.0f, 1.0f);
  float *gvT = filled(N, -1.0f, 1.0f);
  float *gx = poisoned(TN), *gv0 = poisoned(N);
  CHECK(flexsn_cpu_lif_backward_f32(T, N, gs, gvs, gvT, gx, gv0, workspace,
                                    2) == FLEXSN_SUCCESS,
        "backward status");

  int checked = 0, spikes = 0;
  for (int64_t n = 0; n < N; ++n) {
    double s[64], v[64], rgx[64], rgv0, rgk;
    if (!reference(T, N, n, x, v0[n], 0.5, s, v, gs, gvs, gvT, rgx, &rgv0,
                   &rgk))
      continue;
    ++checked;
    for (int64_t t = 0; t < T; ++t) {
      size_t i = (size_t)(t * N + n);
      spikes += s[t] != 0.0;
      CHECK(spike[i] == (float)s[t] && spike_fs[i] == spike[i] &&
                spike_tr[i] == spike[i],
            "spike (%lld, %lld)", (long long)t, (long long)n);
      CHECK(close_to(v_seq[i], v[t], 1e-5) && v_seq_tr[i] == v_seq[i],
            "v_seq (%lld, %lld): %g, want %g", (long long)t, (long long)n,
            v_seq[i], v[t]);
      CHECK(close_to(gx[i], rgx[t], 1e-4), "x_grad (%lld, %lld): %g, want %g",
            (long long)t, (long long)n, gx[i], rgx[t]);
    }
    CHECK(v_final[n] == v_seq[(size_t)((T - 1) * N + n)], "v_final %lld",
          (long long)n);
    CHECK(close_to(gv0[n], rgv0, 1e-4), "v_init_grad %lld: %g, want %g",
          (long long)n, gv0[n], rgv0);
  }
  CHECK(checked > N * 9 / 10 && spikes > 0 && spikes < checked * T,
        "checked %d neurons, %d spikes", checked, spikes);
  printf("lif f32: inference, final state and training match the formulas "
         "(%s)\n",
         failures ? "with failures" : "all");

  /* Bitwise the same for 1, 3 and OpenMP's default number of threads. */
  const int32_t counts[] = {1, 3, 0};
  for (int c = 0; c < 3; ++c) {
    float *other = poisoned(TN), *other_gx = poisoned(TN);
    flexsn_cpu_lif_inference_f32(T, N, x, v0, other, NULL, counts[c]);
    flexsn_cpu_lif_backward_f32(T, N, gs, gvs, gvT, other_gx, NULL, workspace,
                                counts[c]);
    CHECK(memcmp(other, spike, TN * sizeof(float)) == 0 &&
              memcmp(other_gx, gx, TN * sizeof(float)) == 0,
          "%d threads differ", counts[c]);
    free(other);
    free(other_gx);
  }
  printf("lif f32: bitwise the same on 1, 2, 3 and the default threads\n");

  /* An absent initial state reads as zeros. */
  float *zeros = calloc(N, sizeof(float)), *spike_z = poisoned(TN);
  float *spike_null = poisoned(TN);
  flexsn_cpu_lif_inference_f32(T, N, x, zeros, spike_z, NULL, 1);
  flexsn_cpu_lif_inference_f32(T, N, x, NULL, spike_null, NULL, 1);
  CHECK(memcmp(spike_z, spike_null, TN * sizeof(float)) == 0,
        "a NULL v_init is not zeros");
  printf("lif f32: NULL v_init reads as zeros\n");

  /* T = 0: the final state is the initial one, the state gradient passes
     through. */
  float *v_final0 = poisoned(N), *gv00 = poisoned(N);
  CHECK(flexsn_cpu_lif_final_state_f32(0, N, x, v0, NULL, v_final0, 2) ==
            FLEXSN_SUCCESS,
        "T = 0 final-state status");
  CHECK(flexsn_cpu_lif_backward_f32(0, N, NULL, NULL, gvT, NULL, gv00,
                                    workspace, 2) == FLEXSN_SUCCESS,
        "T = 0 backward status");
  CHECK(memcmp(v_final0, v0, N * sizeof(float)) == 0 &&
            memcmp(gv00, gvT, N * sizeof(float)) == 0,
        "T = 0 does not pass the states through");
  printf("lif f32: T = 0 passes the states through\n");

  /* The argument checks, before the kernel runs. */
  CHECK(flexsn_cpu_lif_inference_f32(-1, N, x, v0, spike, v_seq, 1) ==
            FLEXSN_ERROR_NEGATIVE_SIZE,
        "T < 0");
  CHECK(flexsn_cpu_lif_inference_f32(T, -5, x, v0, spike, v_seq, 1) ==
            FLEXSN_ERROR_NEGATIVE_SIZE,
        "N < 0");
  CHECK(flexsn_cpu_lif_inference_f32(T, N, NULL, v0, spike, v_seq, 1) ==
            FLEXSN_ERROR_NULL_POINTER,
        "x NULL");
  CHECK(flexsn_cpu_lif_forward_f32(T, N, x, v0, spike, v_seq, NULL, 1) ==
            FLEXSN_ERROR_NULL_POINTER,
        "workspace NULL");
  CHECK(flexsn_cpu_lif_inference_f32(INT64_MAX / 2, 3, x, v0, spike, v_seq,
                                     1) == FLEXSN_ERROR_SIZE_OVERFLOW,
        "T * N overflow");
  printf("lif f32: bad arguments get their status\n");
}

/* PLIF with w per channel: [T, B, C, S] sequences, the forward against the
 * formula and dL/dw[c] against the reference summed over the channel. */
static void check_plif_channels(void) {
  const int64_t T = 5, B = 2, C = 3, S = 5000, N = B * C * S;
  const size_t TN = (size_t)(T * N);
  float *x = filled(TN, -0.5f, 2.5f), *v0 = filled(N, -0.5f, 0.9f);
  float w[3] = {-1.0f, 0.0f, 1.5f};
  size_t workspace_bytes = flexsn_cpu_plif_forward_f32_workspace_bytes(T, N);
  float *workspace = malloc(workspace_bytes);
  float *spike = poisoned(TN);
  CHECK(flexsn_cpu_plif_forward_f32(T, N, C, S, x, v0, spike, NULL, w,
                                    workspace, 2) == FLEXSN_SUCCESS,
        "plif forward status");
  float *gs = filled(TN, -1.0f, 1.0f);
  float w_grad[3] = {NAN, NAN, NAN}, w_grad1[3] = {NAN, NAN, NAN};
  CHECK(flexsn_cpu_plif_backward_f32(T, N, C, S, gs, NULL, x, NULL, NULL, NULL,
                                     w, w_grad, workspace, 2) == FLEXSN_SUCCESS,
        "plif backward status");
  CHECK(flexsn_cpu_plif_backward_f32(T, N, C, S, gs, NULL, x, NULL, NULL, NULL,
                                     w, w_grad1, workspace,
                                     1) == FLEXSN_SUCCESS,
        "plif backward status, 1 thread");
  CHECK(memcmp(w_grad, w_grad1, sizeof w_grad) == 0,
        "w_grad differs between 1 and 2 threads");

  double want[3] = {0, 0, 0};
  double scale[3] = {0, 0, 0};
  for (int64_t n = 0; n < N; ++n) {
    int64_t c = (n / S) % C;
    double k = 1.0 / (1.0 + exp(-(double)w[c]));
    double s[64], v[64], gx[64], gv0, gk;
    int clear =
        reference(T, N, n, x, v0[n], k, s, v, gs, NULL, NULL, gx, &gv0, &gk);
    want[c] += gk * k * (1.0 - k);
    scale[c] += fabs(gk * k * (1.0 - k));
    for (int64_t t = 0; clear && t < T; ++t)
      CHECK(spike[t * N + n] == (float)s[t], "plif spike (%lld, %lld)",
            (long long)t, (long long)n);
  }
  for (int c = 0; c < 3; ++c)
    CHECK(fabs(w_grad[c] - want[c]) <= 1e-4 * scale[c] && scale[c] > 0,
          "w_grad[%d] = %g, want %g", c, w_grad[c], want[c]);
  printf("plif per-channel f32: forward and w_grad match the formulas\n");

  CHECK(flexsn_cpu_plif_forward_f32(T, N, C, S + 1, x, v0, spike, NULL, w,
                                    workspace, 1) == FLEXSN_ERROR_BAD_CHANNELS,
        "N not a multiple of C * S");
  CHECK(flexsn_cpu_plif_forward_f32(T, N, 0, S, x, v0, spike, NULL, w,
                                    workspace, 1) == FLEXSN_ERROR_BAD_CHANNELS,
        "C = 0");
  CHECK(flexsn_cpu_plif_forward_f32(T, N, C, S, x, v0, spike, NULL, NULL,
                                    workspace, 1) == FLEXSN_ERROR_NULL_POINTER,
        "w NULL");
  printf("plif per-channel f32: bad channels get their status\n");
}

/* `n` floats from a fresh allocation, the first at a 64-byte boundary
 * plus `shift` floats. */
static float *floats_at(size_t n, size_t shift) {
  char *raw = malloc((n + shift) * sizeof(float) + 64);
  uintptr_t aligned = ((uintptr_t)raw + 63) / 64 * 64;
  return (float *)aligned + shift;
}

/* Big calls (T * N = 4 Mi values) whose outputs' rows are all aligned to a
 * vector take the kernels' streaming-store path; the same calls with the
 * outputs one element off take the plain one. Both give the same bits,
 * and the formula's values. (The allocations are not freed: the test
 * exits.) */
static void check_streaming(void) {
  const int64_t T = 4, N = 1 << 20;
  const size_t TN = (size_t)(T * N);
  float *x = floats_at(TN, 0), *v0 = floats_at(N, 0);
  for (size_t i = 0; i < TN; ++i)
    x[i] = uniform(-0.5f, 2.5f);
  for (int64_t n = 0; n < N; ++n)
    v0[n] = uniform(-0.5f, 0.9f);
  float *spike[2], *v_seq[2], *x_grad[2], *workspace[2];
  float *gs = floats_at(TN, 0);
  for (size_t i = 0; i < TN; ++i)
    gs[i] = uniform(-1.0f, 1.0f);
  size_t workspace_floats =
      flexsn_cpu_lif_forward_f32_workspace_bytes(T, N) / sizeof(float);
  for (int shift = 0; shift < 2; ++shift) {
    spike[shift] = floats_at(TN, shift);
    v_seq[shift] = floats_at(TN, shift);
    x_grad[shift] = floats_at(TN, shift);
    workspace[shift] = floats_at(workspace_floats, shift);
    CHECK(flexsn_cpu_lif_inference_f32(T, N, x, v0, spike[shift], v_seq[shift],
                                       2) == FLEXSN_SUCCESS,
          "big inference status");
    CHECK(flexsn_cpu_lif_forward_f32(T, N, x, v0, NULL, NULL, workspace[shift],
                                     2) == FLEXSN_SUCCESS,
          "big forward status");
    CHECK(flexsn_cpu_lif_backward_f32(T, N, gs, NULL, NULL, x_grad[shift], NULL,
                                      workspace[shift], 2) == FLEXSN_SUCCESS,
          "big backward status");
  }
  CHECK(memcmp(spike[0], spike[1], TN * sizeof(float)) == 0 &&
            memcmp(v_seq[0], v_seq[1], TN * sizeof(float)) == 0 &&
            memcmp(x_grad[0], x_grad[1], TN * sizeof(float)) == 0,
        "aligned and shifted outputs differ");
  int64_t checked = 0;
  for (int64_t n = 0; n < N; n += 7) {
    double s[64], v[64];
    if (!reference(T, N, n, x, v0[n], 0.5, s, v, NULL, NULL, NULL, NULL, NULL,
                   NULL))
      continue;
    ++checked;
    for (int64_t t = 0; t < T; ++t)
      CHECK(spike[0][t * N + n] == (float)s[t] &&
                close_to(v_seq[0][t * N + n], v[t], 1e-5),
            "big inference (%lld, %lld)", (long long)t, (long long)n);
  }
  CHECK(checked > N / 8, "checked %lld neurons", (long long)checked);

  /* f16: 8-lane vectors of 16 bytes. The inputs are f16 bit patterns of
     values in [0.5, 2). */
  uint16_t *x16 = (uint16_t *)floats_at(TN / 2, 0), *out16[2], *seq16[2];
  for (size_t i = 0; i < TN; ++i) {
    uniform(0.0f, 1.0f); /* the next seed */
    x16[i] = (uint16_t)(0x3800 + (seed >> 33) % 0x800);
  }
  for (int shift = 0; shift < 2; ++shift) {
    out16[shift] = (uint16_t *)floats_at(TN / 2 + 1, 0) + shift;
    seq16[shift] = (uint16_t *)floats_at(TN / 2 + 1, 0) + shift;
    CHECK(flexsn_cpu_lif_inference_f16(T, N, x16, NULL, out16[shift],
                                       seq16[shift], 2) == FLEXSN_SUCCESS,
          "big f16 inference status");
  }
  size_t ones = 0;
  for (size_t i = 0; i < TN; ++i)
    ones += out16[0][i] == 0x3C00;
  CHECK(memcmp(out16[0], out16[1], TN * 2) == 0 &&
            memcmp(seq16[0], seq16[1], TN * 2) == 0 && ones > 0 && ones < TN,
        "f16: aligned and shifted outputs differ, or %zu spikes", ones);
  printf("lif f32, f16: big calls give the same bits with aligned and "
         "shifted outputs\n");
}

int main(void) {
  check_lif();
  check_plif_channels();
  check_streaming();
  return failures ? 1 : 0;
}
