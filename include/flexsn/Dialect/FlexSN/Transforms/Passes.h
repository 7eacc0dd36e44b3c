//===- Passes.h - FlexSN transformation passes ------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H

#include "flexsn/Dialect/FlexSN/IR/EnumOptions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::flexsn {

#define GEN_PASS_DECL
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

/// Reports, through `errorHandler`, the first list option given with no
/// value (`variants=`): a list left out means its default, so an empty one
/// would silently mean the default too. Also the first one that names a
/// value twice (`storage-types=f16,f16`). `owner` names the pass or
/// pipeline.
template <typename... Lists>
LogicalResult
checkListOptions(StringRef owner,
                 function_ref<LogicalResult(const Twine &)> errorHandler,
                 const Lists &...lists) {
  LogicalResult result = success();
  auto check = [&](const auto &list) {
    if (failed(result))
      return;
    if (list.hasValue() && list.empty())
      result = errorHandler(owner + ": '" + list.ArgStr +
                            "=' lists no value: name one or more, or leave "
                            "the option out for its default");
    for (size_t i = 0; i < list.size() && succeeded(result); ++i)
      for (size_t j = 0; j < i && succeeded(result); ++j)
        if (list[i] == list[j])
          result = errorHandler(owner + ": '" + list.ArgStr +
                                "' lists a value twice");
  };
  (check(lists), ...);
  return result;
}

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
