//===- CompileRequest.td - The compile request's fields ----*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Every compile option, declared once: each field of a compile request
// (docs/CompileRequest.md) and each option of the pipelines
// (flexsn-lower-to-cpu, flexsn-lower-to-nvvm). flexsn-tblgen
// -gen-compile-request-fields writes from these records the table that
// lib/Pipelines/CompileRequest.cpp checks requests against (and prints as
// the schema that flexsn-pygen copies into the Python layer), the pipelines'
// option members (Pipelines.h), and the readers storing each request field
// into its member. Enum-valued fields name the dialect's ODS enum: its cases
// are the field's allowed values.
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
/// that depends on the target; the description says how); for a bool,
/// count or text option it is also the option's llvm::cl::init.
class RequestField<string object_, string name_, RequestFieldType type_,
                   code default_, string description_> {
  string object = object_;
  string name = name_;
  RequestFieldType type = type_;
  code defaultValue = default_;
  string description = description_;
  /// For an Enums or EnumMap field: the ODS enum whose cases it holds.
  EnumAttrInfo values = ?;
  /// Whether the reader stores a PipelineOption field by hand, not by the
  /// generated reader (the record says why).
  bit readByHand = 0;
  /// 0: an option of the pipelines that requests do not hold.
  bit inRequest = 1;
}

/// A field that is an option of the pipelines: the C++ member `member_`,
/// named `passOption_` in pass-option text, of the options struct
/// `options_` ("kernels": every target's KernelOptions, "cpu":
/// LowerToCPUOptions, "cuda": LowerToNVVMOptions). The member's type follows
/// the field's (bool, unsigned, std::string, or a list of strings or of
/// the enum's cases), its description is the field's.
///
/// `passes` lists the passes (by their options structs' prefix, `FlexSN<Pass>`)
/// whose option of the same member name takes the member as it is: the
/// pipelines copy them with the generated `forwardTo<Pass>`, and
/// `getOptionUnusedWithout<Pass>` names such a member set away from its
/// default that no other pass reads, for a pipeline that does not run the
/// pass.
class PipelineOption<string options_, string member_, string passOption_> {
  string options = options_;
  string member = member_;
  string passOption = passOption_;
  list<string> passes = [];
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
// The kernels every target builds (KernelOptions)
//===----------------------------------------------------------------------===//

def : RequestField<"kernels", "neurons", RequestTexts, [{json::Array()}],
                   "The neurons to compile (empty: all)">,
      PipelineOption<"kernels", "neurons", "neurons"> {
  // An empty list means every neuron, as for configure's.
  let readByHand = 1;
  let passes = ["FlexSNGenerateKernels", "FlexSNAutodiff",
                "FlexSNCoupleKernels"];
}
def : RequestField<"kernels", "variants", RequestEnums, [{nullptr}],
    "The kernel variants: inference, final-state (left out: both), forward, "
    # "backward (training, by autodiff)">,
      PipelineOption<"kernels", "variants", "variants"> {
  let values = FlexSN_KernelVariant;
}
def : RequestField<"kernels", "storage_types", RequestEnums, [{nullptr}],
    "The sequences' storage types: f32, f16, bf16 (left out: f32 on the "
    # "CPU, all three on CUDA)">,
      PipelineOption<"kernels", "storageTypes", "storage-types"> {
  let values = FlexSN_StorageType;
}
def : RequestField<"kernels", "spike_storage", RequestEnums,
                   [{json::Array({"dense"})}],
    "How inference and final-state kernels store spike outputs: dense (left "
    # "out), u8 and/or bits">,
      PipelineOption<"kernels", "spikeStorage", "spike-storage"> {
  let values = FlexSN_SpikeStorage;
  let passes = ["FlexSNGenerateKernels"];
}
def : RequestField<"kernels", "save_in_storage_type", RequestBool, [{true}],
    "Training kernels save what the backward reads in their storage type "
    # "(f16/bf16: half the bytes of f32, a backward at rounded values); "
    # "false: in f32">,
      PipelineOption<"kernels", "saveInStorageType", "save-in-storage-type"> {
  let passes = ["FlexSNAutodiff"];
}
def : RequestField<"kernels", "store_all", RequestBool, [{false}],
    "Training kernels save every value the backward step reads">,
      PipelineOption<"kernels", "storeAll", "store-all"> {
  let passes = ["FlexSNAutodiff"];
}
def : RequestField<"kernels", "coupled", RequestBool, [{false}],
    "Also build each neuron kernel coupled from the neuron's first output "
    # "into its first input (flexsn-couple-kernels): a recurrent layer's "
    # "kernels">,
      PipelineOption<"kernels", "coupledKernels", "coupled-kernels">;
def : RequestField<"kernels", "fuse", RequestBool, [{true}],
    "Fuse first: elementwise linalg ops into the scans they feed or read, "
    # "scans over one domain into one (flexsn-fuse-producers, -consumers, "
    # "-siblings), so that a block marked flexsn.block becomes one kernel">,
      PipelineOption<"kernels", "fuse", "fuse">;

//===----------------------------------------------------------------------===//
// The targets' own fields (LowerToCPUOptions, LowerToNVVMOptions). Which
// targets a request may name is the target registry's (lib/Targets): each
// registered target is a field of `targets`.
//===----------------------------------------------------------------------===//

def : RequestField<"targets.cpu", "parallel", RequestBool, [{true}],
    "Run chunks of neurons across threads with OpenMP (the code then needs "
    # "libomp; kernel functions take a trailing thread count); false gives "
    # "serial loops">,
      PipelineOption<"cpu", "parallel", "parallel">;
def : RequestField<"targets.cpu", "vector_width", RequestCount, [{8}],
    "With parallel: neurons per SIMD vector (8: one AVX2 register of f32; 0: "
    # "one neuron at a time)">,
      PipelineOption<"cpu", "vectorWidth", "vector-width">;
def : RequestField<"targets.cpu", "generate_kernels", RequestBool, [{true}],
    "Generate kernel functions from the neurons first; false lowers the "
    # "scans already in the module">,
      PipelineOption<"cpu", "generateKernels", "generate-kernels">;

def : RequestField<"targets.cuda", "chips", RequestTexts,
                   [{json::Array({"sm_90"})}],
    "The target architectures, e.g. sm_90 (left out) or sm_80,sm_90: one "
    # "cubin per chip">,
      PipelineOption<"cuda", "chips", "chip">;
// The fatbin is the tool's output (kernels.fatbin), not a pipeline option.
def : RequestField<"targets.cuda", "fatbin", RequestBool, [{false}],
    "Bundle the chips' cubins into kernels.fatbin (needed for more than one "
    # "chip)">;
def : RequestField<"targets.cuda", "toolkit", RequestText,
                   [{"/usr/local/cuda"}],
    "The CUDA toolkit: ptxas, libdevice and fatbinary are found there">,
      PipelineOption<"cuda", "toolkit", "toolkit">;
def : RequestField<"targets.cuda", "features", RequestText, [{"+ptx80"}],
                   "PTX features">,
      PipelineOption<"cuda", "features", "features">;
def : RequestField<"targets.cuda", "opt_level", RequestCount, [{3}],
                   "LLVM's optimization level (0-3)">,
      PipelineOption<"cuda", "optLevel", "opt-level">;
// flexsn-compile picks the format from the request's fatbin.
def : RequestField<"targets.cuda", "format", RequestText, [{"bin"}],
                   "Object format: bin (cubin), fatbin or isa (PTX)">,
      PipelineOption<"cuda", "format", "format"> {
  let inRequest = 0;
}
def : RequestField<"targets.cuda", "approximate_surrogates", RequestBool,
                   [{false}],
    "Evaluate surrogate gradients with the GPU's approximate exp, division "
    # "(a few ulp): backward kernels issue fewer instructions">,
      PipelineOption<"cuda", "approximateSurrogates",
                     "approximate-surrogates">;

#endif // FLEXSN_PIPELINES_COMPILEREQUEST_TD
