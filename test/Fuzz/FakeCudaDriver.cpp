//===- FakeCudaDriver.cpp - A CUDA driver stand-in for fuzzing ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// See FakeCudaDriver.h. Built as a shared library named libcuda.so.1, which
// the runtime fuzz target links: the runtime's dlopen("libcuda.so.1") then
// finds it already loaded. Single-threaded, as the fuzz target is.
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

struct Context {
  unsigned long long id;
  int device;
};

struct Module {
  int context;
  unsigned long long contextId;
  bool loaded;
};

struct Function {
  int module;
  std::string name;
};

struct Driver {
  Context contexts[FAKE_CUDA_NUM_CONTEXTS];
  unsigned long long nextId = 1;
  bool primaryActive[2] = {true, true};
  int primaryRetains[2] = {0, 0};
  std::vector<int> stack;   // context indices; the back is current
  std::vector<int> streams; // stream i+1 belongs to context streams[i]
  std::vector<fake_cuda_allocation> allocations;
  std::vector<Module> modules;
  std::vector<Function> functions;
  std::vector<fake_cuda_copy> copies;
  int launches = 0, calls = 0;
  int failAt = -1;
  CUresult failWith = CUDA_SUCCESS;
  bool failed = false;
  bool unknownPointerError = true;
  bool imageLoadable = true;
  fake_cuda_launch_hook hook = nullptr;
  std::string violation;

  Driver() {
    for (int i = 0; i < FAKE_CUDA_NUM_CONTEXTS; ++i)
      contexts[i] = {nextId++, i == 2 ? 0 : i};
  }
};

Driver &drv() {
  static Driver driver;
  return driver;
}

void violate(const std::string &what) {
  if (drv().violation.empty())
    drv().violation = what;
}

// Handles are small tagged integers; nothing dereferences them.
constexpr uintptr_t kContextTag = 0x1000, kStreamTag = 0x2000,
                    kModuleTag = 0x100000, kFunctionTag = 0x200000;

CUcontext contextHandle(int index) {
  return reinterpret_cast<CUcontext>(kContextTag + index);
}

int contextIndex(CUcontext context) {
  uintptr_t raw = reinterpret_cast<uintptr_t>(context);
  if (raw < kContextTag || raw >= kContextTag + FAKE_CUDA_NUM_CONTEXTS)
    return -1;
  return static_cast<int>(raw - kContextTag);
}

int current() { return drv().stack.empty() ? -1 : drv().stack.back(); }

/// Counts the call; true if it is the one chosen to fail.
bool failsNow() {
  Driver &d = drv();
  if (d.calls++ == d.failAt) {
    d.failed = true;
    return true;
  }
  return false;
}

/// The context a stream runs in; -1 for an unknown stream. The NULL stream
/// is the current context's.
int streamContext(CUstream stream) {
  if (!stream)
    return current();
  uintptr_t raw = reinterpret_cast<uintptr_t>(stream);
  if (raw <= kStreamTag || raw > kStreamTag + drv().streams.size())
    return -1;
  return drv().streams[raw - kStreamTag - 1];
}

/// Whether the current context's kernels may access [p, p + bytes).
bool accessible(uint64_t p, uint64_t bytes, bool write) {
  const fake_cuda_allocation *a = fake_cuda_find(p);
  int ctx = current();
  if (!a || ctx < 0 || bytes > a->size - (p - a->base))
    return false;
  switch (a->memory) {
  case FAKE_CUDA_DEVICE:
    return a->context == ctx;
  case FAKE_CUDA_MANAGED:
  case FAKE_CUDA_HOST_MAPPED:
    return true;
  case FAKE_CUDA_HOST_ELSEWHERE:
    return false;
  case FAKE_CUDA_POOL: {
    unsigned flags = a->access[drv().contexts[ctx].device];
    return flags == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE ||
           (!write && flags == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
  }
  }
  return false;
}

void checkStream(CUstream stream, const char *call) {
  if (current() < 0 || streamContext(stream) != current())
    violate(std::string(call) + " on a stream of another context");
}

} // namespace

extern "C" {

//===----------------------------------------------------------------------===//
// Control
//===----------------------------------------------------------------------===//

void fake_cuda_reset(void) {
  Driver &d = drv();
  d.stack.clear();
  d.streams.clear();
  d.allocations.clear();
  d.copies.clear();
  d.modules.clear();
  d.functions.clear();
  d.launches = d.calls = 0;
  d.failAt = -1;
  d.failed = false;
  d.unknownPointerError = true;
  d.imageLoadable = true;
  d.hook = nullptr;
  d.violation.clear();
  d.primaryActive[0] = d.primaryActive[1] = true;
  d.primaryRetains[0] = d.primaryRetains[1] = 0;
}

void fake_cuda_reset_records(void) {
  drv().copies.clear();
  drv().launches = 0;
}

CUcontext fake_cuda_context(int index) { return contextHandle(index); }

void fake_cuda_set_current(int index) {
  drv().stack.clear();
  if (index >= 0)
    drv().stack.push_back(index);
}

int fake_cuda_current(void) { return current(); }
int fake_cuda_stack_depth(void) { return static_cast<int>(drv().stack.size()); }

void fake_cuda_recreate_context(int index) {
  Driver &d = drv();
  d.contexts[index].id = d.nextId++;
}

void fake_cuda_set_primary_active(int device, int active) {
  drv().primaryActive[device] = active != 0;
}

int fake_cuda_context_device(int index) { return drv().contexts[index].device; }

CUstream fake_cuda_stream(int index) {
  drv().streams.push_back(index);
  return reinterpret_cast<CUstream>(kStreamTag + drv().streams.size());
}

uint64_t fake_cuda_allocate(const fake_cuda_allocation *allocation) {
  Driver &d = drv();
  fake_cuda_allocation a = *allocation;
  // 2^44 apart: an allocation may be up to 2^43 bytes and never meets the
  // next; the first one starts high, away from null.
  a.base = (static_cast<uint64_t>(d.allocations.size()) + 1) << 44;
  if (a.size > (uint64_t(1) << 43))
    a.size = uint64_t(1) << 43;
  d.allocations.push_back(a);
  return a.base;
}

const fake_cuda_allocation *fake_cuda_find(uint64_t address) {
  for (const fake_cuda_allocation &a : drv().allocations)
    if (address >= a.base && address - a.base < a.size)
      return &a;
  return nullptr;
}

void fake_cuda_set_unknown_pointer_error(int error) {
  drv().unknownPointerError = error != 0;
}

void fake_cuda_set_image_loadable(int loadable) {
  drv().imageLoadable = loadable != 0;
}

void fake_cuda_fail_call(int n, CUresult result) {
  drv().failAt = n < 0 ? -1 : drv().calls + n;
  drv().failWith = result;
  drv().failed = false;
}

int fake_cuda_failure_injected(void) { return drv().failed; }

void fake_cuda_set_launch_hook(fake_cuda_launch_hook hook) {
  drv().hook = hook;
}

int fake_cuda_num_calls(void) { return drv().calls; }
int fake_cuda_num_launches(void) { return drv().launches; }
int fake_cuda_num_copies(void) { return static_cast<int>(drv().copies.size()); }
const fake_cuda_copy *fake_cuda_copies(void) { return drv().copies.data(); }

int fake_cuda_live_modules(void) {
  int live = 0;
  for (const Module &m : drv().modules)
    live += m.loaded && drv().contexts[m.context].id == m.contextId;
  return live;
}

const char *fake_cuda_violation(void) {
  return drv().violation.empty() ? nullptr : drv().violation.c_str();
}

//===----------------------------------------------------------------------===//
// Driver entry points (the names the runtime resolves with dlsym)
//===----------------------------------------------------------------------===//

#define FAKE_CALL()                                                            \
  if (failsNow())                                                              \
  return drv().failWith

// Never fails: the runtime calls it once per process.
CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *context) {
  FAKE_CALL();
  int ctx = current();
  *context = ctx < 0 ? nullptr : contextHandle(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext context, unsigned long long *id) {
  FAKE_CALL();
  int ctx = contextIndex(context);
  if (ctx < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  *id = drv().contexts[ctx].id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext context) {
  FAKE_CALL();
  int ctx = contextIndex(context);
  if (ctx < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  drv().stack.push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *context) {
  FAKE_CALL();
  if (drv().stack.empty()) {
    violate("cuCtxPopCurrent with an empty context stack");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (context)
    *context = contextHandle(drv().stack.back());
  drv().stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  FAKE_CALL();
  int ctx = contextIndex(context);
  if (context && ctx < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!drv().stack.empty())
    drv().stack.pop_back();
  if (ctx >= 0)
    drv().stack.push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  FAKE_CALL();
  if (ordinal < 0 || ordinal > 1)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice device,
                                            unsigned int *flags, int *active) {
  FAKE_CALL();
  if (device < 0 || device > 1)
    return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = drv().primaryActive[device];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  FAKE_CALL();
  if (device < 0 || device > 1)
    return CUDA_ERROR_INVALID_DEVICE;
  ++drv().primaryRetains[device];
  *context = contextHandle(device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  FAKE_CALL();
  if (device < 0 || device > 1)
    return CUDA_ERROR_INVALID_DEVICE;
  if (drv().primaryRetains[device]-- == 0)
    violate("cuDevicePrimaryCtxRelease without a retain");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCtx(CUstream stream, CUcontext *context) {
  FAKE_CALL();
  int ctx = streamContext(stream);
  if (ctx < 0)
    return stream ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
  *context = contextHandle(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                       CUpointer_attribute attribute,
                                       CUdeviceptr ptr) {
  FAKE_CALL();
  const fake_cuda_allocation *a = fake_cuda_find(ptr);
  if (!a)
    return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    if (a->memory != FAKE_CUDA_HOST_MAPPED &&
        a->memory != FAKE_CUDA_HOST_ELSEWHERE)
      return CUDA_ERROR_INVALID_VALUE;
    *static_cast<CUdeviceptr *>(data) =
        a->memory == FAKE_CUDA_HOST_MAPPED ? ptr : ptr ^ 0x40;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
    int ctx = current();
    if (a->memory != FAKE_CUDA_POOL || ctx < 0)
      return CUDA_ERROR_INVALID_VALUE;
    *static_cast<unsigned long long *>(data) =
        a->access[drv().contexts[ctx].device];
    return CUDA_SUCCESS;
  }
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *static_cast<int *>(data) =
        a->memory == FAKE_CUDA_POOL ? 0 : drv().contexts[a->context].device;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int count,
                                        CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr) {
  FAKE_CALL();
  const fake_cuda_allocation *a = fake_cuda_find(ptr);
  if (!a && drv().unknownPointerError)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    switch (attributes[i]) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext *>(data[i]) = !a || a->memory == FAKE_CUDA_POOL
                                               ? nullptr
                                               : contextHandle(a->context);
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned *>(data[i]) =
          !a ? 0
          : a->memory == FAKE_CUDA_HOST_MAPPED ||
                  a->memory == FAKE_CUDA_HOST_ELSEWHERE
              ? CU_MEMORYTYPE_HOST
              : CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned *>(data[i]) = a && a->memory == FAKE_CUDA_MANAGED;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr *>(data[i]) = a ? a->base : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t *>(data[i]) = a ? a->size : 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  FAKE_CALL();
  int ctx = current();
  if (ctx < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!image || !drv().imageLoadable)
    return CUDA_ERROR_INVALID_IMAGE;
  drv().modules.push_back({ctx, drv().contexts[ctx].id, true});
  *module = reinterpret_cast<CUmodule>(kModuleTag + drv().modules.size() - 1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *function, CUmodule module,
                                     const char *name) {
  FAKE_CALL();
  uintptr_t index = reinterpret_cast<uintptr_t>(module) - kModuleTag;
  if (index >= drv().modules.size() || !drv().modules[index].loaded) {
    violate("cuModuleGetFunction on a module not loaded");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // An image lacks the entries whose names start with "missing".
  if (!name || std::strncmp(name, "missing", 7) == 0)
    return CUDA_ERROR_NOT_FOUND;
  drv().functions.push_back({static_cast<int>(index), name});
  *function =
      reinterpret_cast<CUfunction>(kFunctionTag + drv().functions.size() - 1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  FAKE_CALL();
  uintptr_t index = reinterpret_cast<uintptr_t>(module) - kModuleTag;
  if (index >= drv().modules.size() || !drv().modules[index].loaded) {
    violate("cuModuleUnload of a module not loaded");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  Module &m = drv().modules[index];
  if (m.context != current() || drv().contexts[m.context].id != m.contextId)
    violate("cuModuleUnload outside the module's context");
  m.loaded = false;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction function, unsigned gridX,
                                unsigned gridY, unsigned gridZ, unsigned blockX,
                                unsigned blockY, unsigned blockZ,
                                unsigned sharedBytes, CUstream stream,
                                void **params, void **extra) {
  FAKE_CALL();
  Driver &d = drv();
  uintptr_t index = reinterpret_cast<uintptr_t>(function) - kFunctionTag;
  if (index >= d.functions.size()) {
    violate("cuLaunchKernel of an unknown function");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const Module &m = d.modules[d.functions[index].module];
  if (!m.loaded || m.context != current() ||
      d.contexts[m.context].id != m.contextId)
    violate("cuLaunchKernel of a function not loaded in the current context");
  checkStream(stream, "cuLaunchKernel");
  if (gridX == 0 || gridY != 1 || gridZ != 1 || blockY != 1 || blockZ != 1 ||
      sharedBytes != 0 || extra || !params)
    violate("cuLaunchKernel with an unexpected configuration");
  ++d.launches;
  if (d.hook)
    d.hook(d.functions[index].name.c_str(), gridX, blockX, params);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src,
                                      size_t bytes, CUstream stream) {
  FAKE_CALL();
  checkStream(stream, "cuMemcpyDtoDAsync");
  if (!accessible(dst, bytes, true) || !accessible(src, bytes, false))
    violate("cuMemcpyDtoDAsync outside memory the context may access");
  drv().copies.push_back({dst, src, bytes, 0});
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value,
                                 size_t bytes, CUstream stream) {
  FAKE_CALL();
  checkStream(stream, "cuMemsetD8Async");
  if (!accessible(dst, bytes, true))
    violate("cuMemsetD8Async outside memory the context may access");
  drv().copies.push_back({dst, 0, bytes, value});
  return CUDA_SUCCESS;
}

} // extern "C"
