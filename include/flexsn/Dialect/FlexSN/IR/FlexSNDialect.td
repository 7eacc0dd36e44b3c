//===- FlexSNDialect.td - FlexSN dialect definition --------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD

include "mlir/IR/OpBase.td"

def FlexSN_Dialect : Dialect {
  let name = "flexsn";
  let cppNamespace = "::mlir::flexsn";
  let summary = "Spiking-neuron dynamics: per-step neuron bodies and time scans";
  let description = [{
    The `flexsn` dialect describes spiking neurons the way researchers write
    them: as a function computing **one neuron for one time step on scalars**.
    A `flexsn.neuron` holds that per-step body; a `flexsn.scan` runs a neuron
    (or an inline body) over whole sequences `[T, N...]`, with the time loop
    inside and `T`, `N` known only at run time.

    The Heaviside spike `flexsn.spike` carries its surrogate gradient as an
    attribute (one of the `#flexsn.<surrogate>` attributes below), so that
    reverse-mode differentiation of the step body needs nothing but the body.
    `flexsn.detach` stops gradients (used for `detach_reset`).

    Bodies compute in `f32`; sequences may be stored as `f32`, `f16` or
    `bf16` (and spikes as `i8`): conversion happens at the scan boundary only.
  }];
  // Custom parseAttribute: an unknown attribute lists the surrogates.
  let useDefaultAttributePrinterParser = 0;
  let hasConstantMaterializer = 1;
  // `flexsn.kernel` on kernel functions, the kernel lists on modules,
  // `flexsn.block` on block functions; `flexsn.name` and `flexsn.trainable`
  // on their arguments and results.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    ::mlir::Attribute parseAttribute(::mlir::DialectAsmParser &parser,
                                     ::mlir::Type type) const override;
    void printAttribute(::mlir::Attribute attr,
                        ::mlir::DialectAsmPrinter &printer) const override;
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect"];
}

class FlexSN_Op<string mnemonic, list<Trait> traits = []>
    : Op<FlexSN_Dialect, mnemonic, traits>;

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_TD
