//===- CompileRequest.td - The compile request's fields ----*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Every field of a compile request (docs/CompileRequest.md), declared once:
// flexsn-tblgen -gen-compile-request-fields writes from these records the
// table that lib/Pipelines/CompileRequest.cpp checks requests against (and
// prints as the schema that flexsn-pygen copies into the Python layer), and
// the code storing each field that names its option's `member` into the
// pipelines' typed options. Enum-valued fields name the dialect's ODS enum:
// its cases are the field's allowed values.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_COMPILEREQUEST_TD
#define FLEXSN_PIPELINES_COMPILEREQUEST_TD

include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td"

/// What a field holds (CompileRequest.cpp's FieldType).
class RequestFieldType<string cppName> {
  string name = cppName;
}
def RequestBool : RequestFieldType<"Bool">;       // true or false
def RequestCount : RequestFieldType<"Count">;     // a non-negative integer
def RequestText : RequestFieldType<"Text">;       // a string
def RequestTexts : RequestFieldType<"Texts">;     // a list of strings
def RequestEnums : RequestFieldType<"Enums">;     // a list of enum cases
def RequestValues : RequestFieldType<"Values">;   // name -> number or bool
def RequestEnumMap : RequestFieldType<"EnumMap">; // name -> an enum case
def RequestObject : RequestFieldType<"Object">;   // fields of its own
def RequestVersion : RequestFieldType<"Version">; // the format's version

/// One field of the object `object` ("" for the request itself, else a
/// dotted path: "targets.cuda"). `defaultValue` is a C++ expression of a
/// json::Value: what a request leaving the field out gets (nullptr where
/// that depends on the target; the description says how).
class RequestField<string object_, string name_, RequestFieldType type_,
                   code default_, string description_> {
  string object = object_;
  string name = name_;
  RequestFieldType type = type_;
  code defaultValue = default_;
  string description = description_;
  /// For an Enums or EnumMap field: the ODS enum whose cases it holds.
  EnumAttrInfo values = ?;
  /// The options member the field is stored in, in the options of
  /// `options` ("kernels": every target's KernelOptions, "cpu":
  /// LowerToCPUOptions, "cuda": LowerToNVVMOptions); empty: the reader
  /// stores it by hand (CompileRequest.cpp says why).
  string options = "";
  string member = "";
}

//===----------------------------------------------------------------------===//
// The request and its configure object
//===----------------------------------------------------------------------===//

def : RequestField<"", "version", RequestVersion, [{kCompileRequestVersion}],
                   "The request format's version (required)">;
def : RequestField<"", "configure", RequestObject, [{nullptr}],
    "How the source's neurons are configured (flexsn-set-params) before it "
    # "is written back as configured.mlir; left out, they are not">;
def : RequestField<"", "neuron_manifest", RequestBool, [{false}],
    "Write neuron.json, the configured neurons' manifest, and torch_step.py, "
    # "their steps over PyTorch tensors where every op has a PyTorch form">;
def : RequestField<"", "kernels", RequestObject, [{nullptr}],
                   "Which kernels every target builds">;
def : RequestField<"", "targets", RequestObject, [{nullptr}],
                   "The targets to build kernels for; left out, none">;

def : RequestField<"configure", "neurons", RequestTexts, [{json::Array()}],
                   "The neurons to configure (empty: all)">;
def : RequestField<"configure", "values", RequestValues, [{json::Object()}],
    "New parameter defaults: a const parameter is specialized to its value">;
def : RequestField<"configure", "kinds", RequestEnumMap, [{json::Object()}],
                   "New parameter bindings"> {
  let values = FlexSN_ParamKind;
}
def : RequestField<"configure", "shapes", RequestEnumMap, [{json::Object()}],
                   "New parameter shapes (after the bindings)"> {
  let values = FlexSN_ParamShape;
}
def : RequestField<"configure", "surrogate", RequestText, [{""}],
    "The surrogate attribute of every spike, as MLIR text (empty: each "
    # "spike's own)">;

//===----------------------------------------------------------------------===//
// The kernels every target builds
//===----------------------------------------------------------------------===//

// Read by hand: an empty list means every neuron, as for configure's.
def : RequestField<"kernels", "neurons", RequestTexts, [{json::Array()}],
                   "The neurons to compile (empty: all)">;
def : RequestField<"kernels", "variants", RequestEnums, [{nullptr}],
                   "The kernel variants (left out: inference and final-state)"> {
  let values = FlexSN_KernelVariant;
  let options = "kernels";
  let member = "variants";
}
def : RequestField<"kernels", "storage_types", RequestEnums, [{nullptr}],
    "The sequences' storage types (left out: f32 on the CPU, all three on "
    # "CUDA)"> {
  let values = FlexSN_StorageType;
  let options = "kernels";
  let member = "storageTypes";
}
def : RequestField<"kernels", "spike_storage", RequestEnums,
                   [{json::Array({"dense"})}],
                   "How inference and final-state kernels store spike outputs"> {
  let values = FlexSN_SpikeStorage;
  let options = "kernels";
  let member = "spikeStorage";
}
def : RequestField<"kernels", "save_in_storage_type", RequestBool, [{true}],
    "Training kernels save what the backward reads in their storage type "
    # "(false: in f32)"> {
  let options = "kernels";
  let member = "saveInStorageType";
}
def : RequestField<"kernels", "store_all", RequestBool, [{false}],
                   "Training kernels save every value the backward step reads"> {
  let options = "kernels";
  let member = "storeAll";
}
def : RequestField<"kernels", "coupled", RequestBool, [{false}],
    "Also build each neuron kernel coupled from the neuron's first output "
    # "into its first input (a recurrent layer's kernels)"> {
  let options = "kernels";
  let member = "coupledKernels";
}
def : RequestField<"kernels", "fuse", RequestBool, [{true}],
    "Fuse elementwise producers, consumers and sibling scans first"> {
  let options = "kernels";
  let member = "fuse";
}

//===----------------------------------------------------------------------===//
// The targets
//===----------------------------------------------------------------------===//

def : RequestField<"targets", "cpu", RequestObject, [{nullptr}],
                   "CPU kernels (cpu.json, kernels.so)">;
def : RequestField<"targets", "cuda", RequestObject, [{nullptr}],
    "CUDA kernels (gpu.json, kernels.cubin or kernels.fatbin)">;

def : RequestField<"targets.cpu", "parallel", RequestBool, [{true}],
                   "Run chunks of neurons across threads with OpenMP"> {
  let options = "cpu";
  let member = "parallel";
}
def : RequestField<"targets.cpu", "vector_width", RequestCount, [{8}],
                   "Neurons per SIMD vector (0: one at a time)"> {
  let options = "cpu";
  let member = "vectorWidth";
}
def : RequestField<"targets.cpu", "generate_kernels", RequestBool, [{true}],
    "Generate kernels from the neurons first (false: lower the scans the "
    # "source already holds)"> {
  let options = "cpu";
  let member = "generateKernels";
}

def : RequestField<"targets.cuda", "chips", RequestTexts,
                   [{json::Array({"sm_90"})}],
                   "The architectures: one cubin per chip"> {
  let options = "cuda";
  let member = "chips";
}
// Read by hand: the fatbin is the tool's output, not a pipeline option.
def : RequestField<"targets.cuda", "fatbin", RequestBool, [{false}],
    "Bundle the chips' cubins into kernels.fatbin (needed for more than one "
    # "chip)">;
def : RequestField<"targets.cuda", "toolkit", RequestText,
                   [{"/usr/local/cuda"}],
                   "The CUDA toolkit (ptxas, libdevice, fatbinary)"> {
  let options = "cuda";
  let member = "toolkit";
}
def : RequestField<"targets.cuda", "features", RequestText, [{"+ptx80"}],
                   "PTX features"> {
  let options = "cuda";
  let member = "features";
}
def : RequestField<"targets.cuda", "opt_level", RequestCount, [{3}],
                   "LLVM's optimization level (0-3)"> {
  let options = "cuda";
  let member = "optLevel";
}
def : RequestField<"targets.cuda", "approximate_surrogates", RequestBool,
                   [{false}],
    "Evaluate surrogate gradients with the GPU's approximate exp and "
    # "division"> {
  let options = "cuda";
  let member = "approximateSurrogates";
}

#endif // FLEXSN_PIPELINES_COMPILEREQUEST_TD
