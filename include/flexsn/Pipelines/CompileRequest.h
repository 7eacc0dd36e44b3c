//===- CompileRequest.h - One compile's options, typed ----------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A compile request is what one `flexsn-compile --request` run builds, as
// a JSON object of typed fields (docs/CompileRequest.md):
// how the neurons are configured, which kernels are made, and for which
// targets. Its fields are declared once, in the table CompileRequest.cpp
// holds: the parser checks a request against it (unknown fields, types,
// enum values, each error naming the field), `--print-request-schema`
// prints it, and flexsn-pygen copies it into the Python layer, which
// writes requests from it. No option travels as pass-option text.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_COMPILEREQUEST_H
#define FLEXSN_PIPELINES_COMPILEREQUEST_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>

namespace mlir::flexsn {

/// The version of the request format this build reads.
inline constexpr int64_t kCompileRequestVersion = 1;

/// One compile's options, read from a request.
struct CompileRequest {
  /// flexsn-set-params' options, applied to the source before it is
  /// written back as configured.mlir; none given configures nothing.
  std::optional<FlexSNSetParamsOptions> configure;
  /// Whether to write neuron.json (and torch_step.py).
  bool neuronManifest = false;
  /// The CPU target: flexsn-lower-to-cpu's options, when it is asked for.
  std::unique_ptr<LowerToCPUOptions> cpu;
  /// The CUDA target: flexsn-lower-to-nvvm's options, when it is asked for.
  std::unique_ptr<LowerToNVVMOptions> cuda;
  /// CUDA: write one fatbin of every chip's cubin (kernels.fatbin), else
  /// the one chip's cubin (kernels.cubin).
  bool fatbin = false;
};

/// Reads a compile request from JSON text; on a request that does not
/// follow the format (an unknown field, a value of the wrong type or not
/// among a field's values, a version this build does not read, options
/// the pipelines refuse), reports one error naming the field through
/// `error` and fails.
FailureOr<CompileRequest>
parseCompileRequest(StringRef text, function_ref<void(const Twine &)> error);

/// The request format as JSON: per object, each field's type, default,
/// allowed values and description (what `flexsn-compile
/// --print-request-schema` prints).
llvm::json::Value getCompileRequestSchema();

} // namespace mlir::flexsn

#endif // FLEXSN_PIPELINES_COMPILEREQUEST_H
