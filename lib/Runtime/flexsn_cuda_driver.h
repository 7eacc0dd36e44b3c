/*===- flexsn_cuda_driver.h - CUDA driver API the runtime uses --*- C -*-===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * The few CUDA driver types and constants the runtime uses, under FlexSN's own
 * names. The runtime reaches the driver through dlsym, so it needs no cuda.h:
 * it builds without a CUDA toolkit, and the single-file header
 * (flexsn-translate --flexsn-header-single-file) compiles with no include
 * path and side by side with a cuda.h the program includes, before or after.
 *
 * The values are the driver's ABI, which NVIDIA keeps stable across driver
 * versions; test/Runtime/cuda-driver-abi.test checks each against cuda.h.
 * The handle types use cuda.h's struct tags, so a CUcontext, CUstream, ...
 * converts to them without a cast. CUresult is an enum of int size on every
 * platform the driver supports, returned like an int.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FLEXSN_RUNTIME_FLEXSN_CUDA_DRIVER_H
#define FLEXSN_RUNTIME_FLEXSN_CUDA_DRIVER_H

typedef int flexsn_cu_result;
typedef int flexsn_cu_device;
typedef unsigned long long flexsn_cu_deviceptr;
typedef struct CUctx_st *flexsn_cu_context;
typedef struct CUmod_st *flexsn_cu_module;
typedef struct CUfunc_st *flexsn_cu_function;
typedef int flexsn_cu_pointer_attribute;

/* CUresult values. */
#define FLEXSN_CUDA_SUCCESS 0
#define FLEXSN_CUDA_ERROR_INVALID_VALUE 1
#define FLEXSN_CUDA_ERROR_OUT_OF_MEMORY 2
#define FLEXSN_CUDA_ERROR_INVALID_CONTEXT 201
#define FLEXSN_CUDA_ERROR_NOT_FOUND 500

/* CUpointer_attribute values. */
#define FLEXSN_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define FLEXSN_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3
#define FLEXSN_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAGS 16

/* CUmemorytype values. */
#define FLEXSN_CU_MEMORYTYPE_HOST 1
#define FLEXSN_CU_MEMORYTYPE_DEVICE 2

/* CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS values. */
#define FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ 1
#define FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE 3

#endif /* FLEXSN_RUNTIME_FLEXSN_CUDA_DRIVER_H */
