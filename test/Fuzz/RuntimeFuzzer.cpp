//===- RuntimeFuzzer.cpp - Fuzz target: the C runtime's launch checks -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Decodes the input into a few flexsn_launch(_channels) calls (descriptor,
// sizes, channels,
// stream, buffers placed in the fake driver's memory, the current context,
// a driver call made to fail) and checks each result against a model of the
// contract that flexsn_runtime.h states, written from the header alone:
//   - the status is the one the contract gives (when no driver call was made
//     to fail), and the buffer blamed is the first offending one;
//   - a call that fails before the driver makes no driver call;
//   - a launch passes exactly the buffers, T, N, the resolved ld, C and S
//     (per-channel kernels) and the scalars, on a grid that covers N, of the
//     kernel (vector or scalar) whose alignment needs hold;
//   - every byte the runtime writes (zeroed gradients, T = 0 final states)
//     is what the contract says, inside memory it validated, on the right
//     stream;
//   - contexts pushed are popped, primary contexts retained are released,
//     modules are unloaded in their own context, and an unloaded image
//     leaves no module behind (the fake driver watches these).
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"
#include "FuzzerSupport.h"

#include "flexsn_runtime.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

/// Reads the input front to back; past its end, every value is zero.
class Reader {
public:
  Reader(const uint8_t *data, size_t size) : data(data), size(size) {}
  uint8_t byte() { return pos < size ? data[pos++] : 0; }
  uint64_t u64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i)
      value = value << 8 | byte();
    return value;
  }
  template <typename T, size_t N>
  T pick(const T (&values)[N]) {
    return values[byte() % N];
  }
  /// A short string (at most 31 bytes).
  std::string text() {
    std::string s;
    for (uint8_t n = byte() % 32; n > 0; --n)
      s += static_cast<char>(byte());
    return s;
  }

private:
  const uint8_t *data;
  size_t size;
  size_t pos = 0;
};

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int kNumKinds = 15; // FLEXSN_INPUT_SEQUENCE .. _COUPLING_WEIGHTS

/// A size: mostly small, sometimes at the edges of the checks.
int64_t readSize(Reader &r) {
  static const int64_t edges[] = {0,
                                  1,
                                  2,
                                  3,
                                  5,
                                  255,
                                  256,
                                  257,
                                  1000,
                                  -1,
                                  std::numeric_limits<int64_t>::min(),
                                  kMax,
                                  kMax / 2,
                                  kMax / 4 + 1,
                                  int64_t(1) << 31,
                                  (int64_t(1) << 39) - 256,
                                  (int64_t(1) << 39) + 1,
                                  int64_t(1) << 61};
  uint8_t how = r.byte();
  if (how < 160)
    return how % 40;
  if (how < 240)
    return r.pick(edges);
  return static_cast<int64_t>(r.u64());
}

bool isSequence(int kind) {
  return kind == FLEXSN_INPUT_SEQUENCE || kind == FLEXSN_OUTPUT_SEQUENCE ||
         kind == FLEXSN_STATE_SEQUENCE ||
         kind == FLEXSN_OPTIONAL_INPUT_SEQUENCE ||
         kind == FLEXSN_SAVED_OUTPUT || kind == FLEXSN_SAVED_INPUT;
}

/// The kinds the header marks "required".
bool isRequired(int kind) {
  return kind == FLEXSN_INPUT_SEQUENCE || kind == FLEXSN_SAVED_OUTPUT ||
         kind == FLEXSN_SAVED_INPUT || kind == FLEXSN_PARAM_GRADIENT ||
         kind == FLEXSN_REDUCTION_SCRATCH || kind == FLEXSN_PER_NEURON_PARAM ||
         kind == FLEXSN_PER_NEURON_PARAM_GRADIENT ||
         kind == FLEXSN_PER_CHANNEL_PARAM ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

bool isPerChannel(int kind) {
  return kind == FLEXSN_PER_CHANNEL_PARAM ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

/// The kinds the kernel accesses one element at a time (no 16-byte
/// vectors): the header needs only element alignment of them.
bool isScalarAccess(int kind) {
  return kind == FLEXSN_PARAM_GRADIENT || kind == FLEXSN_REDUCTION_SCRATCH ||
         isPerChannel(kind);
}

/// The gradients zeroed before a launch and for empty problems.
bool isZeroedGradient(int kind) {
  return kind == FLEXSN_PARAM_GRADIENT ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

/// The kinds the header marks "written".
bool isWritten(int kind) {
  return kind == FLEXSN_OUTPUT_SEQUENCE || kind == FLEXSN_STATE_SEQUENCE ||
         kind == FLEXSN_FINAL_STATE || kind == FLEXSN_SAVED_OUTPUT ||
         kind == FLEXSN_PARAM_GRADIENT || kind == FLEXSN_REDUCTION_SCRATCH ||
         kind == FLEXSN_PER_NEURON_PARAM_GRADIENT ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

/// a * b + c, or -1 if it overflows int64 (all operands >= 0).
int64_t mulAdd(int64_t a, int64_t b, int64_t c) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product) ||
      __builtin_add_overflow(product, c, &product))
    return -1;
  return product;
}

/// ceil(a / 8) for a >= 0, without overflow.
int64_t ceilDiv8(int64_t a) { return a / 8 + (a % 8 != 0); }

/// One decoded flexsn_launch call.
struct Call {
  bool haveImage = true;
  flexsn_image *image = nullptr;
  flexsn_kernel_desc desc{};
  bool haveDesc = true;
  std::vector<flexsn_buffer_kind> kinds;
  std::vector<int> elementSizes;
  std::vector<void *> buffers;
  std::vector<float> scalarValues;
  std::vector<const void *> scalars;
  bool haveKinds = true, haveBuffers = true, haveScalars = true;
  std::string vectorName, scalarName;
  CUstream stream = nullptr;
  int streamContext = -1; // of a non-NULL stream; -1: a handle the driver
                          // does not know
  int64_t T = 0, N = 0, ld = 0;
  int64_t C = 0, S = 0; // flexsn_launch passes 0, 0

  int numBuffers() const { return haveDesc ? desc.num_buffers : 0; }
  /// Whether the kernel has per-channel buffers (and takes C and S).
  bool hasChannels() const {
    for (int i = 0; i < numBuffers(); ++i)
      if (isPerChannel(desc.kinds[i]))
        return true;
    return false;
  }
  int64_t elementSize(int i) const {
    return desc.element_sizes ? desc.element_sizes[i] : desc.element_size;
  }
  /// The index of the k-th initial state, which the k-th final state pairs
  /// with.
  int initialState(int k) const {
    for (int j = 0; j < desc.num_buffers; ++j)
      if (desc.kinds[j] == FLEXSN_INITIAL_STATE && k-- == 0)
        return j;
    return -1;
  }
  /// ld as the kernel receives it.
  int64_t resolvedLd() const { return ld == 0 ? N : ld; }
  /// The bytes the header says buffer i spans; -1 on overflow.
  int64_t extent(int i) const {
    int kind = desc.kinds[i];
    if (kind == FLEXSN_PARAM_GRADIENT)
      return 4;
    if (isPerChannel(kind))
      return C < 0 ? -1 : mulAdd(C, 4, 0);
    if (kind == FLEXSN_REDUCTION_SCRATCH) {
      int64_t gradients =
          std::count(kinds.begin(), kinds.end(), FLEXSN_PARAM_GRADIENT);
      return 4 + 4 * gradients * ((N + 255) / 256);
    }
    if (!isSequence(kind))
      return mulAdd(N, elementSize(i), 0);
    if (T == 0 || N == 0)
      return 0;
    int64_t elements = mulAdd(T - 1, resolvedLd(), N);
    if (elements < 0)
      return -1;
    // Bits: T rows of ceil(ld / 8) bytes, the last ceil(N / 8).
    if (elementSize(i) == FLEXSN_BIT_PACKED)
      return mulAdd(T - 1, ceilDiv8(resolvedLd()), ceilDiv8(N));
    return mulAdd(elements, elementSize(i), 0);
  }
};

struct Expectation {
  flexsn_status status;
  int blamed = -1; // flexsn_last_failed_buffer(): the buffer at fault
  bool beforeDriver = false;
};

/// The checks that need no driver, in the header's order; SUCCESS if all
/// pass.
Expectation checkWithoutDriver(const Call &c) {
  Expectation e{FLEXSN_ERROR_INVALID_ARGUMENT};
  e.beforeDriver = true;
  const flexsn_kernel_desc &d = c.desc;
  if (!c.image || !c.image->data || c.image->size == 0 || !c.haveDesc ||
      !d.vector_kernel || !d.scalar_kernel || d.vector_width < 1 ||
      (d.element_size != 2 && d.element_size != 4) || d.num_buffers < 0 ||
      d.num_scalars < 0 ||
      int64_t(d.num_buffers) + d.num_scalars > FLEXSN_MAX_KERNEL_ARGS)
    return e;
  if (d.num_buffers > 0 && (!d.kinds || !c.haveBuffers))
    return e;
  int initials = 0, finals = 0, scratch = 0, couplings = 0;
  for (int i = 0; i < d.num_buffers; ++i) {
    int kind = d.kinds[i];
    if (kind < 0 || kind >= kNumKinds)
      return e;
    initials += kind == FLEXSN_INITIAL_STATE;
    finals += kind == FLEXSN_FINAL_STATE;
    scratch += kind == FLEXSN_REDUCTION_SCRATCH;
    couplings += kind == FLEXSN_COUPLING_WEIGHTS;
    // Bytes (1) and bits only for an output sequence's spikes.
    if (d.element_sizes && d.element_sizes[i] != 2 && d.element_sizes[i] != 4 &&
        !((d.element_sizes[i] == 1 ||
           d.element_sizes[i] == FLEXSN_BIT_PACKED) &&
          kind == FLEXSN_OUTPUT_SEQUENCE))
      return e;
  }
  if (finals > initials || scratch > 1 || couplings > 1)
    return e;
  if (d.num_scalars > 0 && !c.haveScalars)
    return e;
  for (int i = 0; i < d.num_scalars; ++i)
    if (!c.scalars[i])
      return e;
  if (c.T < 0 || c.N < 0)
    return {FLEXSN_ERROR_NEGATIVE_SIZE, -1, true};
  if (c.ld < 0 || (c.ld != 0 && c.ld < c.N))
    return {FLEXSN_ERROR_BAD_STRIDE, -1, true};
  if (c.hasChannels() &&
      (c.C < 1 || c.S < 1 || c.C > std::numeric_limits<int32_t>::max() ||
       mulAdd(c.C, c.S, 0) < 0 || c.N % (c.C * c.S) != 0))
    return {FLEXSN_ERROR_BAD_CHANNELS, -1, true};
  // flexsn_launch and flexsn_launch_channels take no coupled kernel.
  if (couplings)
    return {FLEXSN_ERROR_BAD_COUPLING, -1, true};
  for (int i = 0; i < d.num_buffers; ++i)
    if (isRequired(d.kinds[i]) && !c.buffers[i])
      return {FLEXSN_ERROR_NULL_POINTER, i, true};
  // The element count of a [T, N] buffer, whether or not the kernel has
  // one, then every buffer's extent in bytes, then the grid.
  if (c.T > 0 && c.N > 0 && mulAdd(c.T - 1, c.resolvedLd(), c.N) < 0)
    return {FLEXSN_ERROR_SIZE_OVERFLOW, -1, true};
  if (c.N > 0 && (c.N - 1) / 256 + 1 > std::numeric_limits<int32_t>::max())
    return {FLEXSN_ERROR_SIZE_OVERFLOW, -1, true};
  for (int i = 0; i < d.num_buffers; ++i)
    if (c.extent(i) < 0)
      return {FLEXSN_ERROR_SIZE_OVERFLOW, -1, true};
  for (int i = 0; i < d.num_buffers; ++i)
    if (c.elementSize(i) != FLEXSN_BIT_PACKED &&
        reinterpret_cast<uintptr_t>(c.buffers[i]) % c.elementSize(i) != 0)
      return {FLEXSN_ERROR_INVALID_ARGUMENT, i, true};
  return {FLEXSN_SUCCESS};
}

/// What checking one buffer gives, as the header describes it.
flexsn_status checkBuffer(int context, const void *p, int64_t bytes,
                          bool written) {
  uint64_t address = reinterpret_cast<uintptr_t>(p);
  const fake_cuda_allocation *a = fake_cuda_find(address);
  if (!a)
    return FLEXSN_ERROR_CONTEXT_MISMATCH;
  bool accessible = false;
  switch (a->memory) {
  case FAKE_CUDA_DEVICE:
    accessible = a->context == context;
    break;
  case FAKE_CUDA_MANAGED:
  case FAKE_CUDA_HOST_MAPPED:
    accessible = true;
    break;
  case FAKE_CUDA_HOST_ELSEWHERE:
    break;
  case FAKE_CUDA_POOL: {
    unsigned flags = a->access[fake_cuda_context_device(context)];
    accessible = flags == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE ||
                 (!written && flags == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
    break;
  }
  }
  if (!accessible)
    return FLEXSN_ERROR_CONTEXT_MISMATCH;
  if (uint64_t(bytes) > a->size - (address - a->base))
    return FLEXSN_ERROR_BUFFER_TOO_SMALL;
  return FLEXSN_SUCCESS;
}

bool primaryActive[2];

/// The context a call runs in: the current one, else the active primary
/// context of the first non-NULL buffer's device; -1 for none.
int contextFor(const Call &c) {
  int context = fake_cuda_current();
  if (context >= 0)
    return context;
  for (int i = 0; i < c.numBuffers(); ++i) {
    if (!c.buffers[i])
      continue;
    const fake_cuda_allocation *a =
        fake_cuda_find(reinterpret_cast<uintptr_t>(c.buffers[i]));
    if (!a)
      return -1;
    int device =
        a->memory == FAKE_CUDA_POOL ? 0 : fake_cuda_context_device(a->context);
    // The primary context of device d is context d.
    return primaryActive[device] ? device : -1;
  }
  return -1;
}

flexsn_status checkContext(const Call &c, int context) {
  if (context < 0)
    return FLEXSN_ERROR_NO_CONTEXT;
  if (c.stream && c.streamContext < 0)
    return FLEXSN_ERROR_CUDA; // the driver does not know the stream
  if (c.stream && c.streamContext != context)
    return FLEXSN_ERROR_CONTEXT_MISMATCH;
  return FLEXSN_SUCCESS;
}

/// The part of the contract that needs the driver, for a call that passed
/// checkWithoutDriver and whose driver calls all succeed. Sets `vector` to
/// the kernel a launch uses.
Expectation checkWithDriver(const Call &c, int context, bool imageLoadable,
                            bool &vector) {
  const flexsn_kernel_desc &d = c.desc;
  int nb = d.num_buffers;
  auto has = [&](int kind) {
    for (int i = 0; i < nb; ++i)
      if (d.kinds[i] == kind)
        return true;
    return false;
  };
  auto gradients = [&]() -> Expectation {
    for (int i = 0; i < nb; ++i)
      if (isZeroedGradient(d.kinds[i]))
        if (flexsn_status s =
                checkBuffer(context, c.buffers[i], c.extent(i), true))
          return {s, i};
    return {FLEXSN_SUCCESS};
  };
  if (c.T == 0 || c.N == 0) {
    // Empty problems: parameter gradients are zeroed (per-neuron ones when
    // there are neurons); for T == 0 the final states take the initial
    // states.
    bool perNeuron = c.N > 0 && has(FLEXSN_PER_NEURON_PARAM_GRADIENT);
    if (has(FLEXSN_PARAM_GRADIENT) || has(FLEXSN_PER_CHANNEL_PARAM_GRADIENT) ||
        perNeuron) {
      if (flexsn_status s = checkContext(c, context))
        return {s};
      Expectation e = gradients();
      if (e.status != FLEXSN_SUCCESS)
        return e;
      for (int i = 0; perNeuron && i < nb; ++i)
        if (d.kinds[i] == FLEXSN_PER_NEURON_PARAM_GRADIENT)
          if (flexsn_status s =
                  checkBuffer(context, c.buffers[i], c.extent(i), true))
            return {s, i};
    }
    if (c.N == 0)
      return {FLEXSN_SUCCESS};
    bool anyFinal = false;
    for (int i = 0; i < nb; ++i)
      anyFinal |= d.kinds[i] == FLEXSN_FINAL_STATE && c.buffers[i];
    if (!anyFinal)
      return {FLEXSN_SUCCESS};
    if (flexsn_status s = checkContext(c, context))
      return {s};
    for (int i = 0, k = 0; i < nb; ++i) {
      if (d.kinds[i] != FLEXSN_FINAL_STATE)
        continue;
      int initial = c.initialState(k++);
      if (!c.buffers[i])
        continue;
      if (flexsn_status s =
              checkBuffer(context, c.buffers[i], c.extent(i), true))
        return {s, i};
      if (c.buffers[initial])
        if (flexsn_status s =
                checkBuffer(context, c.buffers[initial], c.extent(i), false))
          return {s, initial};
    }
    return {FLEXSN_SUCCESS};
  }

  if (flexsn_status s = checkContext(c, context))
    return {s};
  for (int i = 0; i < nb; ++i)
    if (c.buffers[i])
      if (flexsn_status s = checkBuffer(context, c.buffers[i], c.extent(i),
                                        isWritten(d.kinds[i])))
        return {s, i};
  vector = c.resolvedLd() % d.vector_width == 0;
  for (int i = 0; i < nb; ++i) {
    // A vector thread stores vector_width / 8 bytes of bits.
    uintptr_t alignment = c.elementSize(i) == FLEXSN_BIT_PACKED
                              ? uintptr_t(d.vector_width / 8)
                              : 16;
    if (!isScalarAccess(d.kinds[i]) && alignment > 1)
      vector &= reinterpret_cast<uintptr_t>(c.buffers[i]) % alignment == 0;
  }
  if (!imageLoadable)
    return {FLEXSN_ERROR_MODULE_LOAD};
  const char *name = vector ? d.vector_kernel : d.scalar_kernel;
  if (std::strncmp(name, "missing", 7) == 0)
    return {FLEXSN_ERROR_KERNEL_NOT_FOUND};
  return {FLEXSN_SUCCESS};
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

const unsigned char kImageBytes[] = {0x7f, 'E', 'L', 'F'};

/// Places buffer `i` of `c` somewhere in the fake driver's memory (or not).
void *placeBuffer(Reader &r, Call &c, int i, int current) {
  uint8_t how = r.byte();
  int other = (current + 1 + r.byte() % 2) % FAKE_CUDA_NUM_CONTEXTS;
  if (current < 0)
    current = other;
  fake_cuda_allocation a{};
  switch (how % 12) {
  case 0:
    return nullptr;
  case 1:
  case 2:
  case 3:
    a.memory = FAKE_CUDA_DEVICE;
    a.context = current;
    break;
  case 4:
    a.memory = FAKE_CUDA_DEVICE;
    a.context = other;
    break;
  case 5:
    a.memory = FAKE_CUDA_MANAGED;
    a.context = other;
    break;
  case 6:
    a.memory = FAKE_CUDA_HOST_MAPPED;
    a.context = other;
    break;
  case 7:
    a.memory = FAKE_CUDA_HOST_ELSEWHERE;
    a.context = current;
    break;
  case 8: {
    static const unsigned flags[] = {
        CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE,
        CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ,
        CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE};
    a.memory = FAKE_CUDA_POOL;
    a.access[0] = r.pick(flags);
    a.access[1] = r.pick(flags);
    break;
  }
  case 9: // an address the driver does not know
    return reinterpret_cast<void *>(uintptr_t(0x10000) + 16 * r.byte());
  case 10: // the same buffer as an earlier one (in-place final states)
    if (i > 0)
      return c.buffers[r.byte() % i];
    return nullptr;
  default: // 11: an odd address, for the alignment checks
    a.memory = FAKE_CUDA_DEVICE;
    a.context = current;
    break;
  }
  static const uint64_t offsets[] = {0, 16, 64, 2, 4, 8, 1};
  uint64_t offset = how % 12 == 11 ? 1 + 2 * (r.byte() % 8) : r.pick(offsets);
  int64_t extent = c.extent(i);
  uint64_t need = extent < 0 ? uint64_t(1) << 43 : uint64_t(extent);
  static const int64_t deltas[] = {0, 0, 0, 16, -1, -2, -4, 1000};
  int64_t delta = r.pick(deltas);
  uint64_t size =
      delta < 0 && need < uint64_t(-delta) ? 0 : need + uint64_t(delta);
  // At least one byte past `offset`, so the buffer lies inside it.
  a.size = offset + std::max<uint64_t>(size, 1);
  return reinterpret_cast<void *>(fake_cuda_allocate(&a) + offset);
}

void decodeCall(Reader &r, Call &c, flexsn_image *image, int current) {
  uint8_t flags = r.byte();
  c.image = flags % 16 == 0 ? nullptr : image;
  c.haveDesc = flags % 16 != 1;
  c.haveKinds = flags % 16 != 2;
  c.haveBuffers = flags % 16 != 3;
  c.haveScalars = flags % 16 != 4;

  static const int widths[] = {4, 4, 8, 2, 1, 0, -1, 3};
  static const int sizes[] = {4, 4, 2, 2, 0, 1, 8, -4};
  static const char *const names[] = {"kernel_vec", "kernel_scalar",
                                      "missing_vec", "missing_scalar", nullptr};
  flexsn_kernel_desc &d = c.desc;
  d.vector_width = r.pick(widths);
  d.element_size = r.pick(sizes);
  uint8_t count = r.byte();
  d.num_buffers = count < 248 ? count % 12 : count == 248 ? -1 : 130;
  uint8_t scalarCount = r.byte();
  d.num_scalars = scalarCount < 250    ? scalarCount % 4
                  : scalarCount == 250 ? -1
                                       : FLEXSN_MAX_KERNEL_ARGS;
  d.vector_kernel = r.pick(names);
  d.scalar_kernel = r.pick(names);
  if (d.vector_kernel && r.byte() % 8 != 0)
    d.vector_kernel = "kernel_vec";
  if (d.scalar_kernel && r.byte() % 8 != 0)
    d.scalar_kernel = "kernel_scalar";

  int storage = std::max(d.num_buffers, 0);
  for (int i = 0; i < storage; ++i) {
    uint8_t kind = r.byte();
    c.kinds.push_back(
        static_cast<flexsn_buffer_kind>(kind < 250    ? kind % kNumKinds
                                        : kind == 250 ? -1
                                                      : kNumKinds));
  }
  if (r.byte() % 4 == 0)
    for (int i = 0; i < storage; ++i)
      c.elementSizes.push_back(r.pick(sizes));
  d.kinds = c.haveKinds && storage > 0 ? c.kinds.data() : nullptr;
  d.element_sizes = c.elementSizes.empty() ? nullptr : c.elementSizes.data();
  int scalars = std::max(d.num_scalars, 0);
  c.scalarValues.assign(scalars, 0.5f);
  for (int i = 0; i < scalars; ++i)
    c.scalars.push_back(r.byte() == 0xff ? nullptr : &c.scalarValues[i]);

  // Channels: none (flexsn_launch), small ones that N is often made a
  // multiple of, or any sizes.
  uint8_t channelHow = r.byte();
  if (channelHow % 4 == 1 || channelHow % 4 == 2) {
    c.C = 1 + r.byte() % 5;
    c.S = 1 + r.byte() % 5;
  } else if (channelHow % 4 == 3) {
    c.C = readSize(r);
    c.S = readSize(r);
  }
  c.T = readSize(r);
  c.N = readSize(r);
  if (channelHow % 4 == 1 && c.N > 0)
    c.N -= c.N % (c.C * c.S);
  uint8_t ldHow = r.byte();
  c.ld = ldHow < 128 ? 0 : ldHow < 200 ? c.N + ldHow % 8 : readSize(r);

  uint8_t streamHow = r.byte() % 4;
  if (streamHow == 1 || streamHow == 2) {
    c.streamContext = streamHow == 1 && current >= 0
                          ? current
                          : r.byte() % FAKE_CUDA_NUM_CONTEXTS;
    c.stream = fake_cuda_stream(c.streamContext);
  } else if (streamHow == 3) {
    c.stream = reinterpret_cast<CUstream>(uintptr_t(0x7f00));
  }

  // Buffers need the descriptor to size them.
  c.buffers.assign(storage, nullptr);
  if (c.haveDesc && d.kinds && d.element_size > 0) {
    bool sane = true;
    for (int i = 0; d.element_sizes && i < storage; ++i)
      sane &= c.elementSizes[i] == 2 || c.elementSizes[i] == 4 ||
              (c.elementSizes[i] == 1 && c.kinds[i] == FLEXSN_OUTPUT_SEQUENCE);
    bool kindsValid = std::all_of(c.kinds.begin(), c.kinds.end(), [](int k) {
      return k >= 0 && k < kNumKinds;
    });
    for (int i = 0; i < storage; ++i)
      c.buffers[i] = sane && kindsValid && c.T >= 0 && c.N >= 0 &&
                             (c.ld == 0 || c.ld >= c.N)
                         ? placeBuffer(r, c, i, current)
                         : reinterpret_cast<void *>(uintptr_t(0x10000));
  }
}

//===----------------------------------------------------------------------===//
// Checking one call
//===----------------------------------------------------------------------===//

const Call *g_call;
bool g_vector;
int g_hookCalls;

void checkLaunch(const char *kernel, unsigned gridX, unsigned blockX,
                 void **params) {
  const Call &c = *g_call;
  const flexsn_kernel_desc &d = c.desc;
  ++g_hookCalls;
  FLEXSN_FUZZ_CHECK(
      std::strcmp(kernel, g_vector ? d.vector_kernel : d.scalar_kernel) == 0,
      "the launch used the other kernel");
  int64_t width = g_vector ? d.vector_width : 1;
  int64_t perBlock = 256 * width;
  FLEXSN_FUZZ_CHECK(blockX == 256 &&
                        int64_t(gridX) == (c.N + perBlock - 1) / perBlock,
                    "the grid does not cover N");
  int nb = d.num_buffers;
  for (int i = 0; i < nb; ++i)
    FLEXSN_FUZZ_CHECK(*static_cast<CUdeviceptr *>(params[i]) ==
                          reinterpret_cast<uintptr_t>(c.buffers[i]),
                      "a buffer parameter is not the caller's buffer");
  FLEXSN_FUZZ_CHECK(*static_cast<int64_t *>(params[nb]) == c.T &&
                        *static_cast<int64_t *>(params[nb + 1]) == c.N &&
                        *static_cast<int64_t *>(params[nb + 2]) ==
                            c.resolvedLd(),
                    "T, N or ld passed wrongly");
  int sizes = 3;
  if (c.hasChannels()) {
    FLEXSN_FUZZ_CHECK(*static_cast<int64_t *>(params[nb + 3]) == c.C &&
                          *static_cast<int64_t *>(params[nb + 4]) == c.S,
                      "C or S passed wrongly");
    sizes = 5;
  }
  for (int i = 0; i < d.num_scalars; ++i)
    FLEXSN_FUZZ_CHECK(params[nb + sizes + i] == c.scalars[i],
                      "a scalar parameter is not the caller's value");
}

/// The copies (memsets, memcpys) a successful call must have made.
std::vector<fake_cuda_copy> expectedCopies(const Call &c) {
  std::vector<fake_cuda_copy> copies;
  const flexsn_kernel_desc &d = c.desc;
  int nb = d.num_buffers;
  if (c.N > 0 && c.T > 0) {
    for (int i = 0; i < nb; ++i)
      if (isZeroedGradient(d.kinds[i]))
        copies.push_back({reinterpret_cast<uintptr_t>(c.buffers[i]), 0,
                          size_t(c.extent(i)), 0});
      else if (d.kinds[i] == FLEXSN_REDUCTION_SCRATCH)
        copies.push_back({reinterpret_cast<uintptr_t>(c.buffers[i]), 0, 4, 0});
    return copies;
  }
  for (int i = 0; i < nb; ++i)
    if (isZeroedGradient(d.kinds[i]))
      copies.push_back({reinterpret_cast<uintptr_t>(c.buffers[i]), 0,
                        size_t(c.extent(i)), 0});
  if (c.N == 0)
    return copies;
  for (int i = 0; i < nb; ++i)
    if (d.kinds[i] == FLEXSN_PER_NEURON_PARAM_GRADIENT)
      copies.push_back({reinterpret_cast<uintptr_t>(c.buffers[i]), 0,
                        size_t(c.extent(i)), 0});
  for (int i = 0, k = 0; i < nb; ++i) {
    if (d.kinds[i] != FLEXSN_FINAL_STATE)
      continue;
    uint64_t dst = reinterpret_cast<uintptr_t>(c.buffers[i]);
    uint64_t src = reinterpret_cast<uintptr_t>(c.buffers[c.initialState(k++)]);
    if (!dst || dst == src)
      continue;
    copies.push_back({dst, src, size_t(c.extent(i)), 0});
  }
  return copies;
}

bool sameCopies(const std::vector<fake_cuda_copy> &expected) {
  std::vector<fake_cuda_copy> actual(
      fake_cuda_copies(), fake_cuda_copies() + fake_cuda_num_copies());
  auto key = [](const fake_cuda_copy &x) {
    return std::make_tuple(x.dst, x.src, x.bytes, x.value);
  };
  auto less = [&](const fake_cuda_copy &x, const fake_cuda_copy &y) {
    return key(x) < key(y);
  };
  std::vector<fake_cuda_copy> e = expected;
  std::sort(actual.begin(), actual.end(), less);
  std::sort(e.begin(), e.end(), less);
  return actual.size() == e.size() &&
         std::equal(actual.begin(), actual.end(), e.begin(),
                    [&](const fake_cuda_copy &x, const fake_cuda_copy &y) {
                      return key(x) == key(y);
                    });
}

void runCall(Reader &r, flexsn_image *image, bool imageLoadable) {
  Call c;
  int current = fake_cuda_current();
  decodeCall(r, c, image, current);
  uint8_t failure = r.byte();
  static const CUresult results[] = {
      CUDA_ERROR_UNKNOWN, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_FOUND,
      CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_CONTEXT};
  fake_cuda_fail_call(failure < 64 ? failure % 16 : -1, results[failure % 5]);

  Expectation expected = checkWithoutDriver(c);
  bool vector = false;
  int context = contextFor(c);
  if (expected.status == FLEXSN_SUCCESS) {
    expected = checkWithDriver(c, context, imageLoadable, vector);
    expected.beforeDriver = false;
  }

  int callsBefore = fake_cuda_num_calls();
  int launchesBefore = fake_cuda_num_launches();
  int copiesBefore = fake_cuda_num_copies();
  int depthBefore = fake_cuda_stack_depth();
  g_call = &c;
  g_vector = vector;
  g_hookCalls = 0;
  void *const *buffers = c.haveBuffers ? c.buffers.data() : nullptr;
  const void *const *scalars = c.haveScalars ? c.scalars.data() : nullptr;
  const flexsn_kernel_desc *desc = c.haveDesc ? &c.desc : nullptr;
  flexsn_status status =
      c.C == 0 && c.S == 0
          ? flexsn_launch(c.image, desc, c.stream, c.T, c.N, c.ld, buffers,
                          scalars)
          : flexsn_launch_channels(c.image, desc, c.stream, c.T, c.N, c.ld, c.C,
                                   c.S, buffers, scalars);
  bool injected = fake_cuda_failure_injected();
  fake_cuda_fail_call(-1, CUDA_SUCCESS);

  if (const char *violation = fake_cuda_violation()) {
    std::fprintf(stderr, "fake driver: %s\n", violation);
    FLEXSN_FUZZ_CHECK(false, "the runtime broke the driver's rules");
  }
  FLEXSN_FUZZ_CHECK(
      std::strcmp(flexsn_status_name(status), "FLEXSN_UNKNOWN_STATUS") != 0,
      "the status is outside the enum");
  if (expected.beforeDriver || !injected) {
    if (status != expected.status ||
        flexsn_last_failed_buffer() != expected.blamed)
      std::fprintf(stderr,
                   "status %s (buffer %d), expected %s (buffer %d); T=%lld "
                   "N=%lld ld=%lld\n",
                   flexsn_status_name(status), flexsn_last_failed_buffer(),
                   flexsn_status_name(expected.status), expected.blamed,
                   (long long)c.T, (long long)c.N, (long long)c.ld);
    FLEXSN_FUZZ_CHECK(status == expected.status,
                      "the status is not the one the contract gives");
    FLEXSN_FUZZ_CHECK(flexsn_last_failed_buffer() == expected.blamed,
                      "the wrong buffer was blamed");
  }
  if (expected.beforeDriver)
    FLEXSN_FUZZ_CHECK(fake_cuda_num_calls() == callsBefore,
                      "a call that fails its own checks reached the driver");
  if (depthBefore > 0)
    FLEXSN_FUZZ_CHECK(fake_cuda_stack_depth() == depthBefore,
                      "the context stack changed depth");
  FLEXSN_FUZZ_CHECK(flexsn_last_failed_buffer() == -1 ||
                        (flexsn_last_failed_buffer() >= 0 &&
                         flexsn_last_failed_buffer() < c.numBuffers()),
                    "the blamed buffer is out of range");

  int launches = fake_cuda_num_launches() - launchesBefore;
  FLEXSN_FUZZ_CHECK(launches == g_hookCalls, "a launch went unchecked");
  if (status == FLEXSN_SUCCESS) {
    bool work = c.T > 0 && c.N > 0;
    FLEXSN_FUZZ_CHECK(launches == (work ? 1 : 0),
                      "a successful call launched the wrong number of kernels");
    if (!injected)
      FLEXSN_FUZZ_CHECK(sameCopies(expectedCopies(c)) && copiesBefore == 0,
                        "a successful call wrote other bytes than the "
                        "contract says");
  } else if (status != FLEXSN_ERROR_LAUNCH) {
    FLEXSN_FUZZ_CHECK(launches == 0, "a failed call launched a kernel");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader r(data, size);
  fake_cuda_reset();
  fake_cuda_set_launch_hook(checkLaunch);

  uint8_t setup = r.byte();
  fake_cuda_set_unknown_pointer_error(setup & 1);
  bool imageLoadable = (setup & 0x0e) != 0;
  fake_cuda_set_image_loadable(imageLoadable);
  primaryActive[0] = (setup & 0x10) == 0;
  primaryActive[1] = (setup & 0x20) == 0;
  fake_cuda_set_primary_active(0, primaryActive[0]);
  fake_cuda_set_primary_active(1, primaryActive[1]);
  fake_cuda_set_current(static_cast<int>(r.byte() % 4) - 1);

  static unsigned char imageData[sizeof kImageBytes];
  std::memcpy(imageData, kImageBytes, sizeof kImageBytes);
  flexsn_image image = FLEXSN_IMAGE_INIT(imageData, sizeof imageData);
  if (setup & 0x40)
    image.size = 0;

  for (int calls = 1 + r.byte() % 3; calls > 0; --calls) {
    // Between calls: another current context, or one destroyed and
    // recreated under the same handle (its modules gone).
    uint8_t between = r.byte();
    if (between % 8 == 1)
      fake_cuda_set_current(static_cast<int>(between / 8 % 4) - 1);
    else if (between % 8 == 2)
      fake_cuda_recreate_context(between / 8 % FAKE_CUDA_NUM_CONTEXTS);
    // Every call starts with an empty record.
    fake_cuda_reset_records();
    runCall(r, &image, imageLoadable);
  }

  int depth = fake_cuda_stack_depth();
  flexsn_status unloaded = flexsn_image_unload(&image);
  FLEXSN_FUZZ_CHECK(unloaded == FLEXSN_SUCCESS,
                    "unloading an image failed with no driver failure");
  FLEXSN_FUZZ_CHECK(fake_cuda_live_modules() == 0,
                    "an unloaded image left a module loaded");
  FLEXSN_FUZZ_CHECK(fake_cuda_stack_depth() == depth,
                    "unloading changed the context stack");
  FLEXSN_FUZZ_CHECK(flexsn_image_unload(&image) == FLEXSN_SUCCESS,
                    "a second unload failed");
  if (const char *violation = fake_cuda_violation()) {
    std::fprintf(stderr, "fake driver: %s\n", violation);
    FLEXSN_FUZZ_CHECK(false, "the runtime broke the driver's rules");
  }

  // The status and role tables answer any value.
  int anyStatus = static_cast<int8_t>(r.byte());
  FLEXSN_FUZZ_CHECK(
      flexsn_status_name(static_cast<flexsn_status>(anyStatus)) &&
          flexsn_status_message(static_cast<flexsn_status>(anyStatus)),
      "a status has no name or message");
  static const char *const roles[] = {
      "input_sequence",    "initial_state",
      "output_sequence",   "state_sequence",
      "final_state",       "optional_input_sequence",
      "saved_output",      "saved_input",
      "param_gradient",    "reduction_scratch",
      "per_neuron_param",  "per_neuron_param_gradient",
      "per_channel_param", "per_channel_param_gradient",
      "coupling_weights"};
  static_assert(sizeof roles / sizeof roles[0] == kNumKinds);
  std::string role = r.text();
  role.resize(std::strlen(role.c_str())); // as C sees it
  int expectedKind = -1;
  for (int k = 0; k < kNumKinds; ++k)
    if (role == roles[k])
      expectedKind = k;
  FLEXSN_FUZZ_CHECK(flexsn_buffer_kind_from_role(role.c_str()) == expectedKind,
                    "a role name maps to the wrong kind");
  return 0;
}
