/* The runtime declares the CUDA driver's types and constants it uses under
 * its own names (lib/Runtime/flexsn_cuda_driver.h): each must equal
 * cuda.h's, or the runtime would call the driver wrongly. Compiling this
 * file is the check. */
#include "flexsn_cuda_driver.h"
#include "flexsn_runtime.h"

#include <cuda.h>

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours)
#define SAME_TYPE(ours, theirs)                                                \
  _Static_assert(_Generic((theirs){0}, ours: 1, default: 0), #ours)

SAME(FLEXSN_CUDA_SUCCESS, CUDA_SUCCESS);
SAME(FLEXSN_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(FLEXSN_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(FLEXSN_CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME(FLEXSN_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_CONTEXT);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
     CU_POINTER_ATTRIBUTE_DEVICE_POINTER);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_MANAGED);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_SIZE);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
     CU_POINTER_ATTRIBUTE_ACCESS_FLAGS);
SAME(FLEXSN_CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
SAME(FLEXSN_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ,
     CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
SAME(FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE,
     CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);

/* Handles are the same types; integers the same size. */
SAME_TYPE(flexsn_stream, CUstream);
SAME_TYPE(flexsn_cu_context, CUcontext);
SAME_TYPE(flexsn_cu_module, CUmodule);
SAME_TYPE(flexsn_cu_function, CUfunction);
SAME_TYPE(flexsn_cu_deviceptr, CUdeviceptr);
SAME_TYPE(flexsn_cu_device, CUdevice);
SAME(sizeof(flexsn_cu_result), sizeof(CUresult));
SAME(sizeof(flexsn_cu_pointer_attribute), sizeof(CUpointer_attribute));

int main(void) { return 0; }
