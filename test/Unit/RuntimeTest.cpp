//===- RuntimeTest.cpp - FlexSN C runtime without a GPU ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The parts of lib/Runtime/flexsn_runtime.c that need no GPU: every argument
// check that must fail before any driver call, status messages, the launch
// paths that must not touch the driver (N == 0, T == 0 without final states),
// and unloading a never-loaded image. Runs on machines without libcuda.so.1;
// where a driver exists (but no context is current), the calls that do reach
// it report NO_CONTEXT instead of NO_DRIVER.
//
// A call that reached the driver would report NO_DRIVER or NO_CONTEXT, so
// every other status asserted here also shows that no driver call was made.
//
// Buffers are fake addresses: validation never dereferences them.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Runtime/flexsn_runtime.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

const unsigned char kImageBytes[] = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};

void *fakePtr(uintptr_t address) { return reinterpret_cast<void *>(address); }

// Shaped like LIF's final_state variant: x, v0, spike, v_final, one scalar.
struct LifCall {
  flexsn_image image = FLEXSN_IMAGE_INIT(kImageBytes, sizeof kImageBytes);
  flexsn_buffer_kind kinds[4] = {FLEXSN_INPUT_SEQUENCE, FLEXSN_INITIAL_STATE,
                                 FLEXSN_OUTPUT_SEQUENCE, FLEXSN_FINAL_STATE};
  flexsn_kernel_desc desc = {
      "lif_final_state_f32_vec4", "lif_final_state_f32", 4, 4, 4, kinds, 1};
  void *buffers[4] = {fakePtr(0x100000), fakePtr(0x200000), fakePtr(0x300000),
                      fakePtr(0x400000)};
  float threshold = 1.0f;
  const void *scalars[1] = {&threshold};
  int64_t T = 8, N = 1000, ld = 0;

  flexsn_status launch() {
    return flexsn_launch(&image, &desc, nullptr, T, N, ld, buffers, scalars);
  }
};

// The status of a well-formed call that needs the driver on this machine.
bool isDriverStatus(flexsn_status status) {
  return status == FLEXSN_ERROR_NO_DRIVER || status == FLEXSN_ERROR_NO_CONTEXT;
}

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

TEST(RuntimeTest, EveryStatusHasItsOwnMessage) {
  std::set<std::string> seen;
  for (int s = FLEXSN_SUCCESS; s <= FLEXSN_ERROR_BAD_COUPLING; ++s) {
    const char *message = flexsn_status_message(static_cast<flexsn_status>(s));
    ASSERT_NE(message, nullptr) << s;
    EXPECT_GT(std::strlen(message), 0u) << s;
    EXPECT_STRNE(message, "unknown status") << s;
    EXPECT_TRUE(seen.insert(message).second) << "duplicate message " << message;
  }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_STREQ(flexsn_status_message(FLEXSN_SUCCESS), "success");
}

// The dialect's buffer roles are the runtime's buffer kinds: the same
// values (which the header emitter names FLEXSN_<ROLE>) and the same names
// (which bindings read from the manifest).
TEST(RuntimeTest, BufferKindsAreTheDialectsRoles) {
  using mlir::flexsn::BufferRole;
  uint32_t count = mlir::flexsn::getMaxEnumValForBufferRole() + 1;
  EXPECT_EQ(count, uint32_t(FLEXSN_COUPLING_WEIGHTS) + 1);
  for (uint32_t value = 0; value < count; ++value) {
    std::optional<BufferRole> role = mlir::flexsn::symbolizeBufferRole(value);
    ASSERT_TRUE(role.has_value()) << value;
    std::string name = mlir::flexsn::stringifyBufferRole(*role).str();
    EXPECT_EQ(flexsn_buffer_kind_from_role(name.c_str()), int(value)) << name;
  }
  EXPECT_EQ(FLEXSN_INPUT_SEQUENCE, int(BufferRole::InputSequence));
  EXPECT_EQ(FLEXSN_FINAL_STATE, int(BufferRole::FinalState));
  EXPECT_EQ(FLEXSN_SAVED_INPUT, int(BufferRole::SavedInput));
  EXPECT_EQ(flexsn_buffer_kind_from_role("workspace"), -1);
}

TEST(RuntimeTest, OutOfRangeStatusIsUnknown) {
  EXPECT_STREQ(flexsn_status_message(static_cast<flexsn_status>(16)),
               "unknown status");
  EXPECT_STREQ(flexsn_status_message(static_cast<flexsn_status>(-1)),
               "unknown status");
  EXPECT_STREQ(flexsn_status_message(static_cast<flexsn_status>(1 << 20)),
               "unknown status");
}

TEST(RuntimeTest, LastCudaErrorStartsAtZeroPerThread) {
  int seen = -1;
  std::thread([&] { seen = flexsn_last_cuda_error(); }).join();
  EXPECT_EQ(seen, 0);
}

//===----------------------------------------------------------------------===//
// Descriptor checks -> INVALID_ARGUMENT
//===----------------------------------------------------------------------===//

TEST(RuntimeTest, WellFormedCallReachesTheDriver) {
  LifCall call;
  flexsn_status first = call.launch();
  EXPECT_TRUE(isDriverStatus(first)) << flexsn_status_message(first);
  // The driver is looked up once; the answer stays the same.
  EXPECT_EQ(call.launch(), first);
  // Optional buffers may be NULL.
  call.buffers[1] = call.buffers[2] = call.buffers[3] = nullptr;
  EXPECT_EQ(call.launch(), first);
  // The stream is only looked at with the driver.
  EXPECT_EQ(flexsn_launch(&call.image, &call.desc,
                          reinterpret_cast<flexsn_stream>(0x1234), call.T,
                          call.N, call.ld, call.buffers, call.scalars),
            first);
}

TEST(RuntimeTest, MalformedImageOrDescriptor) {
  {
    LifCall call;
    EXPECT_EQ(flexsn_launch(nullptr, &call.desc, nullptr, 8, 1000, 0,
                            call.buffers, call.scalars),
              FLEXSN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(flexsn_launch(&call.image, nullptr, nullptr, 8, 1000, 0,
                            call.buffers, call.scalars),
              FLEXSN_ERROR_INVALID_ARGUMENT);
  }
  struct Case {
    const char *what;
    void (*mutate)(LifCall &);
  };
  const Case cases[] = {
      {"image data NULL", [](LifCall &c) { c.image.data = nullptr; }},
      {"image size 0", [](LifCall &c) { c.image.size = 0; }},
      {"vector name NULL", [](LifCall &c) { c.desc.vector_kernel = nullptr; }},
      {"scalar name NULL", [](LifCall &c) { c.desc.scalar_kernel = nullptr; }},
      {"width 0", [](LifCall &c) { c.desc.vector_width = 0; }},
      {"width -4", [](LifCall &c) { c.desc.vector_width = -4; }},
      {"element size 3", [](LifCall &c) { c.desc.element_size = 3; }},
      {"element size 8", [](LifCall &c) { c.desc.element_size = 8; }},
      {"element size 0", [](LifCall &c) { c.desc.element_size = 0; }},
      {"num_buffers < 0", [](LifCall &c) { c.desc.num_buffers = -1; }},
      {"num_scalars < 0", [](LifCall &c) { c.desc.num_scalars = -1; }},
      {"too many buffers",
       [](LifCall &c) { c.desc.num_buffers = FLEXSN_MAX_KERNEL_ARGS + 1; }},
      {"too many arguments",
       [](LifCall &c) { c.desc.num_scalars = FLEXSN_MAX_KERNEL_ARGS - 3; }},
      {"kinds NULL", [](LifCall &c) { c.desc.kinds = nullptr; }},
      {"kind out of range",
       [](LifCall &c) { c.kinds[2] = static_cast<flexsn_buffer_kind>(99); }},
      {"final state without initial state",
       [](LifCall &c) { c.kinds[1] = FLEXSN_INPUT_SEQUENCE; }},
      {"a scalar pointer NULL", [](LifCall &c) { c.scalars[0] = nullptr; }},
  };
  for (const Case &k : cases) {
    LifCall call;
    k.mutate(call);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT) << k.what;
    // The descriptor is checked before the sizes.
    call.T = -1;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT) << k.what;
  }
  {
    LifCall call;
    EXPECT_EQ(flexsn_launch(&call.image, &call.desc, nullptr, 8, 1000, 0,
                            nullptr, call.scalars),
              FLEXSN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(flexsn_launch(&call.image, &call.desc, nullptr, 8, 1000, 0,
                            call.buffers, nullptr),
              FLEXSN_ERROR_INVALID_ARGUMENT);
  }
}

TEST(RuntimeTest, DescriptorEdgesThatAreFine) {
  // No buffers and no scalars: NULL arrays are fine.
  LifCall call;
  call.desc.num_buffers = 0;
  call.desc.kinds = nullptr;
  call.desc.num_scalars = 0;
  flexsn_status status = flexsn_launch(&call.image, &call.desc, nullptr, 8,
                                       1000, 0, nullptr, nullptr);
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
  // Exactly FLEXSN_MAX_KERNEL_ARGS arguments.
  std::vector<float> values(FLEXSN_MAX_KERNEL_ARGS, 0.0f);
  std::vector<const void *> scalars;
  for (float &v : values)
    scalars.push_back(&v);
  LifCall full;
  full.desc.num_scalars = FLEXSN_MAX_KERNEL_ARGS - 4;
  status = flexsn_launch(&full.image, &full.desc, nullptr, 8, 1000, 0,
                         full.buffers, scalars.data());
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
  // Inference-shaped: a state sequence and no final state; width 1.
  LifCall inference;
  inference.kinds[3] = FLEXSN_STATE_SEQUENCE;
  inference.desc.vector_width = 1;
  inference.desc.element_size = 2;
  status = inference.launch();
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
}

//===----------------------------------------------------------------------===//
// Sizes, strides, pointers, overflow, alignment
//===----------------------------------------------------------------------===//

TEST(RuntimeTest, NegativeSizes) {
  LifCall call;
  call.T = -1;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NEGATIVE_SIZE);
  call.T = 8;
  call.N = -1;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NEGATIVE_SIZE);
  call.T = INT64_MIN;
  call.N = INT64_MIN;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NEGATIVE_SIZE);
  // Sizes are checked before the stride and the pointers.
  call.ld = -5;
  call.buffers[0] = nullptr;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NEGATIVE_SIZE);
}

TEST(RuntimeTest, BadStride) {
  LifCall call;
  call.ld = -1;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_STRIDE);
  call.ld = call.N - 1;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_STRIDE);
  call.ld = 1;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_STRIDE);
  // The stride is checked before the pointers.
  call.buffers[0] = nullptr;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_STRIDE);
  // ld == N, ld > N (a padded row) and ld == 0 (meaning N) are fine.
  for (int64_t ld : {int64_t(1000), int64_t(1001), int64_t(4096), int64_t(0)}) {
    LifCall ok;
    ok.ld = ld;
    flexsn_status status = ok.launch();
    EXPECT_TRUE(isDriverStatus(status)) << ld;
  }
  // ld < N is fine nowhere, not even for N == 0 or T == 0.
  call.buffers[0] = fakePtr(0x100000);
  call.T = 0;
  call.ld = 5;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_STRIDE);
}

TEST(RuntimeTest, RequiredInputNull) {
  LifCall call;
  call.buffers[0] = nullptr;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER);
  // Required even when nothing would be read.
  call.T = 0;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER);
  call.T = 8;
  call.N = 0;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER);
  // A second input sequence is required too.
  LifCall two;
  two.kinds[2] = FLEXSN_INPUT_SEQUENCE;
  two.buffers[2] = nullptr;
  EXPECT_EQ(two.launch(), FLEXSN_ERROR_NULL_POINTER);
  // The pointers are checked before the extents.
  call.N = INT64_MAX;
  call.T = 2;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER);
}

TEST(RuntimeTest, SizeOverflow) {
  struct Case {
    int64_t T, N, ld;
    int elementSize;
  };
  const Case cases[] = {
      {1, INT64_MAX / 4 + 1, 0, 4}, // N * 4 overflows
      {1, INT64_MAX / 2 + 1, 0, 2}, // N * 2 overflows
      {1, INT64_MAX, 0, 2},
      {3, int64_t(1) << 40, INT64_MAX / 2, 4}, // (T-1)*ld overflows
      {INT64_MAX, 2, 0, 4},                    // (T-1)*ld + N overflows
      {int64_t(1) << 33, 1 << 30, int64_t(1) << 30, 4}, // 2^63 elements
      {int64_t(1) << 32, 1 << 30, int64_t(1) << 30, 4}, // bytes overflow
      {int64_t(1) << 32, 1 << 30, int64_t(1) << 30, 2}, // bytes overflow
      {1, (int64_t(INT32_MAX) + 1) * 256, 0, 4},        // 2^31 blocks
  };
  for (const Case &k : cases) {
    LifCall call;
    call.T = k.T;
    call.N = k.N;
    call.ld = k.ld;
    call.desc.element_size = k.elementSize;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_SIZE_OVERFLOW)
        << k.T << " " << k.N << " " << k.ld << " " << k.elementSize;
    // Overflow is checked before alignment.
    call.buffers[2] = fakePtr(0x300001);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_SIZE_OVERFLOW);
  }
  // Just below the limits.
  const Case fine[] = {
      {int64_t(1) << 31, 1 << 30, int64_t(1) << 30, 2}, // 2^62 bytes
      {int64_t(1) << 20, 1 << 30, int64_t(1) << 30, 4},
      {1, int64_t(INT32_MAX) * 256, 0, 4}, // 2^31 - 1 blocks
  };
  for (const Case &k : fine) {
    LifCall call;
    call.T = k.T;
    call.N = k.N;
    call.ld = k.ld;
    call.desc.element_size = k.elementSize;
    flexsn_status status = call.launch();
    EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
  }
}

TEST(RuntimeTest, Misalignment) {
  for (int b = 0; b < 4; ++b) {
    LifCall call;
    call.buffers[b] = fakePtr(0x100002 + 0x100000 * b);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT) << b;
    // 2-byte elements only need 2-byte alignment.
    call.desc.element_size = 2;
    flexsn_status status = call.launch();
    EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
    call.buffers[b] = fakePtr(0x100001 + 0x100000 * b);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT) << b;
    // Checked even where nothing is touched.
    call.N = 0;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT) << b;
  }
  // 4-byte aligned but not 16-byte aligned: the scalar kernel serves it.
  LifCall call;
  call.buffers[0] = fakePtr(0x100004);
  flexsn_status status = call.launch();
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
}

//===----------------------------------------------------------------------===//
// Paths that need no driver
//===----------------------------------------------------------------------===//

TEST(RuntimeTest, EmptyProblemsNeedNoDriver) {
  {
    LifCall call; // N == 0: every extent is empty, even the final state's
    call.N = 0;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
    call.T = 0;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
  }
  {
    LifCall call; // T == 0 without a final-state buffer
    call.T = 0;
    call.buffers[3] = nullptr;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
    call.buffers[1] = nullptr;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
    call.ld = 4000; // a stride >= N is fine
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
  }
  {
    LifCall call; // inference-shaped: no final state at all
    call.kinds[3] = FLEXSN_STATE_SEQUENCE;
    call.T = 0;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
  }
  {
    // Even a stream handle that is not one is not looked at.
    LifCall call;
    call.T = 0;
    call.buffers[3] = nullptr;
    EXPECT_EQ(flexsn_launch(&call.image, &call.desc,
                            reinterpret_cast<flexsn_stream>(0xdead0), 0, 1000,
                            0, call.buffers, call.scalars),
              FLEXSN_SUCCESS);
  }
}

TEST(RuntimeTest, FinalStateCopyForTZeroNeedsTheDriver) {
  LifCall call;
  call.T = 0;
  flexsn_status status = call.launch();
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
  call.buffers[1] = nullptr; // zero-fill instead of copying
  status = call.launch();
  EXPECT_TRUE(isDriverStatus(status)) << flexsn_status_message(status);
}

TEST(RuntimeTest, ConcurrentCallsAgree) {
  std::vector<std::thread> threads;
  std::vector<flexsn_status> results(16);
  LifCall shared;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      results[i] = flexsn_launch(&shared.image, &shared.desc, nullptr, 8, 1000,
                                 0, shared.buffers, shared.scalars);
    });
  for (std::thread &t : threads)
    t.join();
  for (flexsn_status s : results) {
    EXPECT_TRUE(isDriverStatus(s)) << flexsn_status_message(s);
    EXPECT_EQ(s, results[0]);
  }
}

//===----------------------------------------------------------------------===//
// Unload
//===----------------------------------------------------------------------===//

// Shaped like a deterministic backward kernel: an incoming gradient, the
// saved workspace, a re-read input, the input gradient, one parameter
// gradient and the reduction scratch.
struct DeterministicBackwardCall {
  flexsn_image image = FLEXSN_IMAGE_INIT(kImageBytes, sizeof kImageBytes);
  flexsn_buffer_kind kinds[6] = {
      FLEXSN_OPTIONAL_INPUT_SEQUENCE, FLEXSN_SAVED_INPUT,
      FLEXSN_INPUT_SEQUENCE,          FLEXSN_OUTPUT_SEQUENCE,
      FLEXSN_PARAM_GRADIENT,          FLEXSN_REDUCTION_SCRATCH};
  flexsn_kernel_desc desc = {
      "k_deterministic_vec", "k_deterministic_scalar", 4, 4, 6, kinds, 0};
  void *buffers[6] = {fakePtr(0x100000), fakePtr(0x200000), fakePtr(0x300000),
                      fakePtr(0x400000), fakePtr(0x500000), fakePtr(0x600004)};
  int64_t T = 8, N = 1000;

  flexsn_status launch() {
    return flexsn_launch(&image, &desc, nullptr, T, N, 0, buffers, nullptr);
  }
};

TEST(RuntimeTest, ReductionScratch) {
  // Well formed, with the scratch only 4-byte aligned (it is accessed one
  // element at a time): the call reaches the driver.
  EXPECT_TRUE(isDriverStatus(DeterministicBackwardCall().launch()));
  {
    // The scratch, the parameter gradient and the saved values are required,
    // even when nothing would be launched.
    for (int buffer : {1, 4, 5}) {
      DeterministicBackwardCall call;
      call.buffers[buffer] = nullptr;
      EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
      call.T = 0;
      EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
    }
    // The incoming gradient is optional.
    DeterministicBackwardCall call;
    call.buffers[0] = nullptr;
    EXPECT_TRUE(isDriverStatus(call.launch()));
  }
  {
    DeterministicBackwardCall call; // two scratches: which one?
    call.kinds[0] = FLEXSN_REDUCTION_SCRATCH;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT);
  }
  {
    DeterministicBackwardCall call; // the counter is an int32
    call.buffers[5] = fakePtr(0x600002);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT);
  }
}

// Shaped like the backward kernel of a neuron with a trainable per-neuron
// parameter: an incoming gradient, the saved workspace, the input
// gradient, the parameter's values and its per-neuron gradient.
struct PerNeuronBackwardCall {
  flexsn_image image = FLEXSN_IMAGE_INIT(kImageBytes, sizeof kImageBytes);
  flexsn_buffer_kind kinds[5] = {FLEXSN_OPTIONAL_INPUT_SEQUENCE,
                                 FLEXSN_SAVED_INPUT, FLEXSN_OUTPUT_SEQUENCE,
                                 FLEXSN_PER_NEURON_PARAM,
                                 FLEXSN_PER_NEURON_PARAM_GRADIENT};
  flexsn_kernel_desc desc = {"k_vec", "k_scalar", 4, 4, 5, kinds, 0};
  void *buffers[5] = {fakePtr(0x100000), fakePtr(0x200000), fakePtr(0x300000),
                      fakePtr(0x400000), fakePtr(0x500000)};
  int64_t T = 8, N = 1000;

  flexsn_status launch() {
    return flexsn_launch(&image, &desc, nullptr, T, N, 0, buffers, nullptr);
  }
};

TEST(RuntimeTest, PerNeuronParams) {
  EXPECT_TRUE(isDriverStatus(PerNeuronBackwardCall().launch()));
  // The values and the gradient are required, even when nothing would be
  // launched (T = 0 zeroes the gradient).
  for (int buffer : {3, 4}) {
    PerNeuronBackwardCall call;
    call.buffers[buffer] = nullptr;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
    EXPECT_EQ(flexsn_last_failed_buffer(), buffer);
    call.T = 0;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
  }
  {
    // f32 values, so 4-byte aligned.
    PerNeuronBackwardCall call;
    call.buffers[3] = fakePtr(0x400002);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT);
  }
  {
    // N = 0: nothing to write, so no driver.
    PerNeuronBackwardCall call;
    call.N = 0;
    EXPECT_EQ(call.launch(), FLEXSN_SUCCESS);
  }
}

// Shaped like the backward kernel of PLIF with a per-channel `w`: an
// incoming gradient, the saved workspace, the input gradient, the values
// [C] and their gradient [C], over [B, C, S] neurons.
struct PerChannelBackwardCall {
  flexsn_image image = FLEXSN_IMAGE_INIT(kImageBytes, sizeof kImageBytes);
  flexsn_buffer_kind kinds[5] = {FLEXSN_OPTIONAL_INPUT_SEQUENCE,
                                 FLEXSN_SAVED_INPUT, FLEXSN_OUTPUT_SEQUENCE,
                                 FLEXSN_PER_CHANNEL_PARAM,
                                 FLEXSN_PER_CHANNEL_PARAM_GRADIENT};
  flexsn_kernel_desc desc = {"k_vec", "k_scalar", 4, 4, 5, kinds, 0};
  void *buffers[5] = {fakePtr(0x100000), fakePtr(0x200000), fakePtr(0x300000),
                      fakePtr(0x400000), fakePtr(0x500000)};
  int64_t T = 8, N = 2 * 3 * 5, C = 3, S = 5;

  flexsn_status launch() {
    return flexsn_launch_channels(&image, &desc, nullptr, T, N, 0, C, S,
                                  buffers, nullptr);
  }
};

TEST(RuntimeTest, PerChannelParams) {
  EXPECT_TRUE(isDriverStatus(PerChannelBackwardCall().launch()));
  {
    // flexsn_launch has no channels to give.
    PerChannelBackwardCall call;
    EXPECT_EQ(flexsn_launch(&call.image, &call.desc, nullptr, call.T, call.N, 0,
                            call.buffers, nullptr),
              FLEXSN_ERROR_BAD_CHANNELS);
  }
  // C and S must tile N, and C fit an int32.
  for (auto [C, S] : {std::pair<int64_t, int64_t>{0, 5},
                      {3, 0},
                      {-3, 5},
                      {3, -5},
                      {4, 5},
                      {3, 7},
                      {int64_t(1) << 31, 1},
                      {int64_t(1) << 40, int64_t(1) << 40}}) {
    PerChannelBackwardCall call;
    call.C = C;
    call.S = S;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_CHANNELS) << C << " " << S;
    call.T = 0; // checked before anything is zeroed
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_BAD_CHANNELS) << C << " " << S;
  }
  {
    // One channel of every neuron, or every neuron its own channel.
    PerChannelBackwardCall call;
    call.C = 1;
    call.S = 1;
    EXPECT_TRUE(isDriverStatus(call.launch()));
    call.C = 30;
    EXPECT_TRUE(isDriverStatus(call.launch()));
  }
  {
    // Negative sizes and strides come first.
    PerChannelBackwardCall call;
    call.C = 0;
    call.T = -1;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_NEGATIVE_SIZE);
  }
  // The values and the gradient are required, even when nothing would be
  // launched (their gradient is zeroed).
  for (int buffer : {3, 4}) {
    PerChannelBackwardCall call;
    call.buffers[buffer] = nullptr;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
    EXPECT_EQ(flexsn_last_failed_buffer(), buffer);
    call.N = 0;
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_NULL_POINTER) << buffer;
  }
  {
    // Accessed one float at a time: 4-byte alignment is enough, 2 is not.
    PerChannelBackwardCall call;
    call.buffers[3] = fakePtr(0x400004);
    call.buffers[4] = fakePtr(0x500004);
    EXPECT_TRUE(isDriverStatus(call.launch()));
    call.buffers[4] = fakePtr(0x500002);
    EXPECT_EQ(call.launch(), FLEXSN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(flexsn_last_failed_buffer(), 4);
  }
  {
    // N = 0 still zeroes the per-channel gradient: the driver is needed.
    PerChannelBackwardCall call;
    call.N = 0;
    EXPECT_TRUE(isDriverStatus(call.launch()));
  }
}

TEST(RuntimeTest, UnloadNeverLoadedImage) {
  flexsn_image image = FLEXSN_IMAGE_INIT(kImageBytes, sizeof kImageBytes);
  EXPECT_EQ(flexsn_image_unload(&image), FLEXSN_SUCCESS);
  EXPECT_EQ(flexsn_image_unload(&image), FLEXSN_SUCCESS);
  EXPECT_EQ(image.state, nullptr);
  EXPECT_EQ(flexsn_image_unload(nullptr), FLEXSN_ERROR_INVALID_ARGUMENT);
  // An image whose launches failed before loading anything.
  LifCall call;
  EXPECT_TRUE(isDriverStatus(call.launch()));
  EXPECT_EQ(flexsn_image_unload(&call.image), FLEXSN_SUCCESS);
  EXPECT_EQ(call.image.state, nullptr);
}

} // namespace
