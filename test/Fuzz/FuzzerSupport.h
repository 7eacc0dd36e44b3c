//===- FuzzerSupport.h - Shared pieces of the FlexSN fuzz targets -*- C++
//-*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Every fuzz target defines LLVMFuzzerTestOneInput. Built with libFuzzer
// (FLEXSN_ENABLE_FUZZERS, clang), libFuzzer supplies main; otherwise
// FuzzerMain.cpp does, running the target once per file given, so that the
// regular test suite replays the corpora and past findings.
//
// A target reports a broken property with FLEXSN_FUZZ_CHECK: it prints what
// failed and aborts, which libFuzzer records as a crash with its input.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TEST_FUZZ_FUZZERSUPPORT_H
#define FLEXSN_TEST_FUZZ_FUZZERSUPPORT_H

#include <cstdio>
#include <cstdlib>

#define FLEXSN_FUZZ_CHECK(condition, message)                                  \
  do {                                                                         \
    if (!(condition)) {                                                        \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n  (%s)\n",        \
                   __FILE__, __LINE__, message, #condition);                   \
      std::abort();                                                            \
    }                                                                          \
  } while (false)

#endif // FLEXSN_TEST_FUZZ_FUZZERSUPPORT_H
