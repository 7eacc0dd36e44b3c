//===- CompileRequest.h - One compile's options, typed ----------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A compile request is what one `flexsn-compile --request` run builds, as
// a JSON object of typed fields (docs/CompileRequest.md):
// how the neurons are configured, which kernels are made, and for which
// targets. Its fields are declared once, in CompileRequest.td (the
// targets a request may name are the registered ones, lib/Targets): the parser
// checks a request against it (unknown fields, types, enum values, each error
// naming the field), `--print-request-schema` prints it, and flexsn-pygen
// copies it into the Python layer, which writes requests from it. No option
// travels as pass-option text.
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
  /// Which kernels every target builds (the `kernels` object; empty when
  /// left out).
  llvm::json::Object kernels;
  /// The targets asked for, by registered name (lib/Targets), with their
  /// sections, checked against their fields: each target reads its own.
  SmallVector<std::pair<std::string, llvm::json::Object>> targets;
};
/// Reads a compile request from JSON text; on a request that does not
/// follow the format (an unknown field, a value of the wrong type or not
/// among a field's values, a version this build does not read, options
/// the pipelines refuse), reports one error naming the field through
/// `error` and fails.
FailureOr<CompileRequest>
parseCompileRequest(StringRef text, function_ref<void(const Twine &)> error);

/// The options of the CPU target read from its request section `cpu`
/// and the request's `kernels`, checked as flexsn-lower-to-cpu checks them.
FailureOr<std::unique_ptr<LowerToCPUOptions>>
readLowerToCPUOptions(const llvm::json::Object &cpu,
                      const llvm::json::Object &kernels,
                      function_ref<LogicalResult(const Twine &)> error);

/// The options of the CUDA target read from its request section `cuda`
/// and the request's `kernels`, checked as flexsn-lower-to-nvvm checks
/// them.
FailureOr<std::unique_ptr<LowerToNVVMOptions>>
readLowerToNVVMOptions(const llvm::json::Object &cuda,
                       const llvm::json::Object &kernels,
                       function_ref<LogicalResult(const Twine &)> error);

/// The request format as JSON: per object, each field's type, default,
/// allowed values and description (what `flexsn-compile
/// --print-request-schema` prints).
llvm::json::Value getCompileRequestSchema();

} // namespace mlir::flexsn

#endif // FLEXSN_PIPELINES_COMPILEREQUEST_H
