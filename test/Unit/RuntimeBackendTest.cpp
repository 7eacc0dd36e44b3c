//===- RuntimeBackendTest.cpp - The runtime's launch logic, recorded -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// flexsn_launch through a backend that records what it is asked
// (lib/Runtime/flexsn_backend.h): which buffers are checked for how many
// bytes, what is zeroed or copied, which entry runs on how many blocks with
// which arguments. The expected values are written from the ABI's rules
// (docs/ABI.md, flexsn_runtime.h), not read from the runtime: a sequence
// spans (T-1)*ld + N elements, a state N; vector entries need ld % width
// == 0 and 16-byte aligned buffers; a block runs 256 threads, a coupled
// block one sample of H neurons. Runs without a GPU.
//
//===----------------------------------------------------------------------===//

#include "flexsn_backend.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

const unsigned char kTestImage[] = {'T', 'E', 'S', 'T'};

void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

/// What the recording backend was asked, in order.
struct Record {
  std::string entered;
  std::vector<std::string> calls;
  std::vector<void *> params;
  /// The first `words` arguments' values (buffer addresses and sizes, 8
  /// bytes each), copied during the launch: they live in its frame.
  int words = 0;
  std::vector<uint64_t> values;
  unsigned int blocks = 0;
  /// A buffer the backend says is too small (none when null).
  const void *tooSmall = nullptr;
  int unloads = 0;
};
Record record;

std::string text(const char *what, const void *p, int64_t bytes) {
  return std::string(what) + " " +
         std::to_string(reinterpret_cast<uintptr_t>(p)) + " " +
         std::to_string(bytes);
}

int accepts(const flexsn_image *image) {
  return image->size >= 4 && std::memcmp(image->data, "TEST", 4) == 0;
}
flexsn_status enter(flexsn_stream, const void *, void **context) {
  record.calls.push_back("enter");
  *context = at(0xC0);
  return FLEXSN_SUCCESS;
}
flexsn_status checkBuffer(void *context, const void *p, int64_t bytes,
                          int written) {
  EXPECT_EQ(context, at(0xC0));
  record.calls.push_back(text(written ? "check-written" : "check", p, bytes));
  return p == record.tooSmall ? FLEXSN_ERROR_BUFFER_TOO_SMALL : FLEXSN_SUCCESS;
}
flexsn_status getFunction(flexsn_image *, void *, const char *name,
                          void **function) {
  record.calls.push_back(std::string("function ") + name);
  *function = at(0xF0);
  return FLEXSN_SUCCESS;
}
flexsn_status copy(void *dst, const void *src, size_t bytes, flexsn_stream) {
  record.calls.push_back(text("copy", dst, int64_t(bytes)) + " from " +
                         std::to_string(reinterpret_cast<uintptr_t>(src)));
  return FLEXSN_SUCCESS;
}
flexsn_status zero(void *dst, size_t bytes, flexsn_stream) {
  record.calls.push_back(text("zero", dst, int64_t(bytes)));
  return FLEXSN_SUCCESS;
}
flexsn_status launchOn(void *function, unsigned int blocks, flexsn_stream,
                       void **params) {
  EXPECT_EQ(function, at(0xF0));
  record.calls.push_back("launch");
  record.blocks = blocks;
  record.params.assign(params, params + 8); // at most 3 buffers, 5 sizes
  record.values.resize(record.words);
  for (int i = 0; i < record.words; ++i)
    std::memcpy(&record.values[i], params[i], sizeof(uint64_t));
  return FLEXSN_SUCCESS;
}
flexsn_status unload(flexsn_image *) {
  ++record.unloads;
  return FLEXSN_SUCCESS;
}

const flexsn_backend kRecording = {"recording", accepts,     enter,
                                   checkBuffer, getFunction, copy,
                                   zero,        launchOn,    unload};

/// Registers the recording backend once, and starts a fresh record.
void fresh() {
  static bool added = flexsn_add_backend(&kRecording);
  ASSERT_TRUE(added);
  record = Record();
}

/// The pointer held in the launch's argument `i` (a buffer's address is
/// passed by reference).
uintptr_t pointerArgument(int i) {
  return static_cast<uintptr_t>(record.values.at(i));
}
int64_t sizeArgument(int i) {
  return static_cast<int64_t>(record.values.at(i));
}

// LIF's final-state kernel: x, v0, spike, v_final and one scalar.
struct FinalStateCall {
  flexsn_image image = FLEXSN_IMAGE_INIT(kTestImage, sizeof kTestImage);
  flexsn_buffer_kind kinds[4] = {FLEXSN_INPUT_SEQUENCE, FLEXSN_INITIAL_STATE,
                                 FLEXSN_OUTPUT_SEQUENCE, FLEXSN_FINAL_STATE};
  flexsn_kernel_desc desc = {"vec", "scalar", 4, 4, 4, kinds, 1};
  void *buffers[4] = {at(0x100000), at(0x200000), at(0x300000), at(0x400000)};
  float threshold = 1.0f;
  const void *scalars[1] = {&threshold};
  int64_t T = 8, N = 1000, ld = 0;

  flexsn_status launch() {
    return flexsn_launch(&image, &desc, nullptr, T, N, ld, buffers, scalars);
  }
};

TEST(RuntimeBackendTest, VectorLaunchChecksEveryExtentThenRunsTheVectorEntry) {
  fresh();
  record.words = 7; // 4 buffers, T, N, ld
  FinalStateCall call;
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  const int64_t sequence = ((8 - 1) * 1000 + 1000) * 4, state = 1000 * 4;
  std::vector<std::string> expected = {
      "enter",
      text("check", at(0x100000), sequence),
      text("check", at(0x200000), state),
      text("check-written", at(0x300000), sequence),
      text("check-written", at(0x400000), state),
      "function vec",
      "launch"};
  EXPECT_EQ(record.calls, expected);
  // ceil(1000 / (256 threads * 4 neurons)).
  EXPECT_EQ(record.blocks, 1u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(pointerArgument(i), 0x100000u * (i + 1)) << i;
  EXPECT_EQ(sizeArgument(4), 8);    // T
  EXPECT_EQ(sizeArgument(5), 1000); // N
  EXPECT_EQ(sizeArgument(6), 1000); // ld = 0 means N
  EXPECT_EQ(record.params[7], &call.threshold);
}

TEST(RuntimeBackendTest,
     AStrideOrAnAlignmentTheVectorEntryCannotTakeRunsScalar) {
  fresh();
  FinalStateCall call;
  call.ld = 1001; // not a multiple of 4
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls[5], "function scalar");
  EXPECT_EQ(record.blocks, 4u); // ceil(1000 / 256)
  EXPECT_EQ(record.calls[1],
            text("check", at(0x100000), (7 * 1001 + 1000) * 4));
  fresh();
  FinalStateCall misaligned;
  misaligned.buffers[2] = at(0x300004); // 4-, not 16-byte aligned
  ASSERT_EQ(misaligned.launch(), FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls[5], "function scalar");
}

TEST(RuntimeBackendTest, ABufferTheBackendRefusesIsBlamedAndNothingRuns) {
  fresh();
  record.tooSmall = at(0x300000);
  FinalStateCall call;
  EXPECT_EQ(call.launch(), FLEXSN_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(flexsn_last_failed_buffer(), 2);
  EXPECT_EQ(record.calls.back(),
            text("check-written", at(0x300000), (7 * 1000 + 1000) * 4));
  EXPECT_EQ(record.blocks, 0u);
}

TEST(RuntimeBackendTest, NoStepsCopyTheInitialStatesToTheFinalOnes) {
  fresh();
  FinalStateCall call;
  call.T = 0;
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  std::vector<std::string> expected = {
      "enter", text("check-written", at(0x400000), 4000),
      text("check", at(0x200000), 4000),
      text("copy", at(0x400000), 4000) + " from " + std::to_string(0x200000)};
  EXPECT_EQ(record.calls, expected);
  // No initial state: zeros; in place: nothing to write.
  fresh();
  call.buffers[1] = nullptr;
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls.back(), text("zero", at(0x400000), 4000));
  fresh();
  call.buffers[1] = call.buffers[3];
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls.back(), text("check", at(0x400000), 4000));
  // No final state: no device at all.
  fresh();
  call.buffers[3] = nullptr;
  ASSERT_EQ(call.launch(), FLEXSN_SUCCESS);
  EXPECT_TRUE(record.calls.empty());
}

TEST(RuntimeBackendTest, AtomicGradientsAndTheTicketAreZeroedBeforeTheLaunch) {
  fresh();
  flexsn_image image = FLEXSN_IMAGE_INIT(kTestImage, sizeof kTestImage);
  // A deterministic backward: gradient in, saved, gradient out, the
  // parameter's gradient, the reduction scratch.
  flexsn_buffer_kind kinds[5] = {
      FLEXSN_OPTIONAL_INPUT_SEQUENCE, FLEXSN_SAVED_INPUT,
      FLEXSN_OUTPUT_SEQUENCE, FLEXSN_PARAM_GRADIENT, FLEXSN_REDUCTION_SCRATCH};
  flexsn_kernel_desc desc = {"vec", "scalar", 4, 4, 5, kinds, 0};
  void *buffers[5] = {at(0x100000), at(0x200000), at(0x300000), at(0x400000),
                      at(0x500000)};
  ASSERT_EQ(flexsn_launch(&image, &desc, nullptr, 2, 512, 0, buffers, nullptr),
            FLEXSN_SUCCESS);
  std::vector<std::string> tail(record.calls.end() - 5, record.calls.end());
  std::vector<std::string> expected = {
      "function vec", text("check-written", at(0x400000), 4),
      text("zero", at(0x400000), 4), text("zero", at(0x500000), 4), "launch"};
  EXPECT_EQ(tail, expected);
  // The scratch holds a ticket and a partial sum per 256 neurons.
  EXPECT_NE(std::find(record.calls.begin(), record.calls.end(),
                      text("check-written", at(0x500000), 4 + 4 * 2)),
            record.calls.end());
}

TEST(RuntimeBackendTest, ChannelAndCoupledLaunchesPassTheirSizes) {
  fresh();
  record.words = 8; // 3 buffers, T, N, ld, C, S
  flexsn_image image = FLEXSN_IMAGE_INIT(kTestImage, sizeof kTestImage);
  flexsn_buffer_kind kinds[3] = {FLEXSN_INPUT_SEQUENCE, FLEXSN_OUTPUT_SEQUENCE,
                                 FLEXSN_PER_CHANNEL_PARAM};
  flexsn_kernel_desc desc = {"vec", "scalar", 4, 4, 3, kinds, 0};
  void *buffers[3] = {at(0x100000), at(0x200000), at(0x300000)};
  ASSERT_EQ(flexsn_launch_channels(&image, &desc, nullptr, 3, 600, 0, 6, 50,
                                   buffers, nullptr),
            FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls[3], text("check", at(0x300000), 4 * 6));
  EXPECT_EQ(sizeArgument(6), 6);  // C
  EXPECT_EQ(sizeArgument(7), 50); // S

  fresh();
  record.words = 7; // 3 buffers, T, N, ld, H
  flexsn_buffer_kind coupled[3] = {
      FLEXSN_INPUT_SEQUENCE, FLEXSN_OUTPUT_SEQUENCE, FLEXSN_COUPLING_WEIGHTS};
  desc.kinds = coupled;
  ASSERT_EQ(flexsn_launch_coupled(&image, &desc, nullptr, 3, 600, 0, 100,
                                  buffers, nullptr),
            FLEXSN_SUCCESS);
  EXPECT_EQ(record.calls[3], text("check", at(0x300000), 4 * 100 * 100));
  EXPECT_EQ(record.calls[4], "function scalar"); // H <= 256: scalar entry
  EXPECT_EQ(record.blocks, 6u);                  // one block per sample
  EXPECT_EQ(sizeArgument(6), 100);               // H
}

TEST(RuntimeBackendTest, UnloadGoesToTheImagesBackend) {
  fresh();
  flexsn_image image = FLEXSN_IMAGE_INIT(kTestImage, sizeof kTestImage);
  EXPECT_EQ(flexsn_image_unload(&image), FLEXSN_SUCCESS);
  EXPECT_EQ(record.unloads, 1);
  // Other images are CUDA's: a never-loaded one unloads without a driver.
  const unsigned char elf[] = {0x7f, 'E', 'L', 'F'};
  flexsn_image cubin = FLEXSN_IMAGE_INIT(elf, sizeof elf);
  EXPECT_EQ(flexsn_image_unload(&cubin), FLEXSN_SUCCESS);
  EXPECT_EQ(record.unloads, 1);
}

} // namespace
