//===- FlexSNInterfaces.td - FlexSN op interfaces ----------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD

include "mlir/IR/OpBase.td"

def FlexSN_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::flexsn";
  let description = [{
    The derivative rule of a scalar op in a step body, used by
    `flexsn-autodiff`'s reverse sweep: given the adjoint of the op's result,
    add each active operand's contribution through the `AdjointBuilder`
    (which also maps forward values to the backward step's recomputed
    copies). FlexSN attaches rules to the `arith` and `math` ops a body may
    use and to `flexsn.spike` (through its surrogate) and `flexsn.detach`
    (none); an op without this interface cannot be differentiated, and the
    pass says so, naming it. Other dialects' ops become differentiable by
    attaching an external model.
  }];
  let methods = [
    InterfaceMethod<[{
        Adds the contributions of the result's adjoint to the adjoints of
        the op's active operands.
      }],
      "::llvm::LogicalResult", "emitAdjoint",
      (ins "::mlir::flexsn::AdjointBuilder &":$builder)>,
  ];
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_TD
