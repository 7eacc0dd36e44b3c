//===- CompileRequest.cpp - One compile's options, typed -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The compile request's fields, declared once (kFields), and the reader
// that checks a request against them and fills the pipelines' typed
// options. Enum-valued fields take the spellings of the dialect's ODS
// enums, listed from FlexSNAttrs.td's cases.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/CompileRequest.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::flexsn;
namespace json = llvm::json;

namespace {

/// What a field holds.
enum class FieldType {
  Bool,    // true or false
  Count,   // a non-negative integer
  Text,    // a string
  Texts,   // a list of strings
  Enums,   // a list of strings, each one of the field's values
  Values,  // an object: parameter name -> number or boolean
  EnumMap, // an object: parameter name -> one of the field's values
  Object,  // an object of fields of its own (the table's `object`)
  Version, // the request format's version, required
};

StringRef typeName(FieldType type) {
  switch (type) {
  case FieldType::Bool:
    return "bool";
  case FieldType::Count:
    return "count";
  case FieldType::Text:
    return "text";
  case FieldType::Texts:
    return "texts";
  case FieldType::Enums:
    return "enums";
  case FieldType::Values:
    return "values";
  case FieldType::EnumMap:
    return "enum_map";
  case FieldType::Object:
    return "object";
  case FieldType::Version:
    return "version";
  }
  llvm_unreachable("a field type");
}

/// The spellings of `EnumT`'s cases 0 to `max`.
template <typename EnumT>
std::vector<std::string> spellings(unsigned max) {
  std::vector<std::string> names;
  for (unsigned value = 0; value <= max; ++value)
    names.push_back(stringifyEnum(static_cast<EnumT>(value)).str());
  return names;
}

struct Field {
  /// The object holding the field: "" for the request itself, else a
  /// dotted path of `Object` fields ("targets.cuda").
  StringRef object;
  StringRef name;
  FieldType type;
  /// What an enum-valued field may hold.
  std::vector<std::string> values;
  /// The value a request that leaves the field out gets; null where that
  /// depends on the target (the description says how).
  json::Value defaultValue;
  StringRef description;
};

/// The request's own fields, and configure's.
std::vector<Field>
getRequestAndConfigureFields(const std::vector<std::string> &kinds,
                             const std::vector<std::string> &shapes) {
  return {{"",
           "version",
           FieldType::Version,
           {},
           kCompileRequestVersion,
           "The request format's version (required)"},
          {"",
           "configure",
           FieldType::Object,
           {},
           nullptr,
           "How the source's neurons are configured (flexsn-set-params) "
           "before it is written back as configured.mlir; left out, they are "
           "not"},
          {"",
           "neuron_manifest",
           FieldType::Bool,
           {},
           false,
           "Write neuron.json, the configured neurons' manifest, and "
           "torch_step.py, their steps over PyTorch tensors where every op "
           "has a PyTorch form"},
          {"",
           "kernels",
           FieldType::Object,
           {},
           nullptr,
           "Which kernels every target builds"},
          {"",
           "targets",
           FieldType::Object,
           {},
           nullptr,
           "The targets to build kernels for; left out, none"},

          {"configure",
           "neurons",
           FieldType::Texts,
           {},
           json::Array(),
           "The neurons to configure (empty: all)"},
          {"configure",
           "values",
           FieldType::Values,
           {},
           json::Object(),
           "New parameter defaults: a const parameter is specialized to its "
           "value"},
          {"configure", "kinds", FieldType::EnumMap, kinds, json::Object(),
           "New parameter bindings"},
          {"configure", "shapes", FieldType::EnumMap, shapes, json::Object(),
           "New parameter shapes (after the bindings)"},
          {"configure",
           "surrogate",
           FieldType::Text,
           {},
           "",
           "The surrogate attribute of every spike, as MLIR text (empty: "
           "each spike's own)"}};
}

/// The kernels object's fields.
std::vector<Field> getKernelFields(const std::vector<std::string> &variants,
                                   const std::vector<std::string> &storage,
                                   const std::vector<std::string> &spikes) {
  return {{"kernels",
           "neurons",
           FieldType::Texts,
           {},
           json::Array(),
           "The neurons to compile (empty: all)"},
          {"kernels", "variants", FieldType::Enums, variants, nullptr,
           "The kernel variants (left out: inference and final-state)"},
          {"kernels", "storage_types", FieldType::Enums, storage, nullptr,
           "The sequences' storage types (left out: f32 on the CPU, all "
           "three on CUDA)"},
          {"kernels", "spike_storage", FieldType::Enums, spikes,
           json::Array{"dense"},
           "How inference and final-state kernels store spike outputs"},
          {"kernels",
           "save_in_storage_type",
           FieldType::Bool,
           {},
           true,
           "Training kernels save what the backward reads in their storage "
           "type (false: in f32)"},
          {"kernels",
           "store_all",
           FieldType::Bool,
           {},
           false,
           "Training kernels save every value the backward step reads"},
          {"kernels",
           "coupled",
           FieldType::Bool,
           {},
           false,
           "Also build each neuron kernel coupled from the neuron's first "
           "output into its first input (a recurrent layer's kernels)"},
          {"kernels",
           "fuse",
           FieldType::Bool,
           {},
           true,
           "Fuse elementwise producers, consumers and sibling scans first"}};
}

/// The targets' fields.
std::vector<Field> getTargetFields() {
  return {{"targets",
           "cpu",
           FieldType::Object,
           {},
           nullptr,
           "CPU kernels (cpu.json, kernels.so)"},
          {"targets",
           "cuda",
           FieldType::Object,
           {},
           nullptr,
           "CUDA kernels (gpu.json, kernels.cubin or kernels.fatbin)"},

          {"targets.cpu",
           "parallel",
           FieldType::Bool,
           {},
           true,
           "Run chunks of neurons across threads with OpenMP"},
          {"targets.cpu",
           "vector_width",
           FieldType::Count,
           {},
           8,
           "Neurons per SIMD vector (0: one at a time)"},
          {"targets.cpu",
           "generate_kernels",
           FieldType::Bool,
           {},
           true,
           "Generate kernels from the neurons first (false: lower the scans "
           "the source already holds)"},

          {"targets.cuda",
           "chips",
           FieldType::Texts,
           {},
           json::Array{"sm_90"},
           "The architectures: one cubin per chip"},
          {"targets.cuda",
           "fatbin",
           FieldType::Bool,
           {},
           false,
           "Bundle the chips' cubins into kernels.fatbin (needed for more "
           "than one chip)"},
          {"targets.cuda",
           "toolkit",
           FieldType::Text,
           {},
           "/usr/local/cuda",
           "The CUDA toolkit (ptxas, libdevice, fatbinary)"},
          {"targets.cuda",
           "features",
           FieldType::Text,
           {},
           "+ptx80",
           "PTX features"},
          {"targets.cuda",
           "opt_level",
           FieldType::Count,
           {},
           3,
           "LLVM's optimization level (0-3)"},
          {"targets.cuda",
           "approximate_surrogates",
           FieldType::Bool,
           {},
           false,
           "Evaluate surrogate gradients with the GPU's approximate exp and "
           "division"}};
}

/// Every field of a request. The pipelines' option structs are where each
/// option's effect is implemented; this table is where a request names
/// them, and the only place that lists them.
const std::vector<Field> &getFields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> all = getRequestAndConfigureFields(
        spellings<ParamKind>(getMaxEnumValForParamKind()),
        spellings<ParamShape>(getMaxEnumValForParamShape()));
    for (std::vector<Field> more :
         {getKernelFields(
              spellings<KernelVariant>(getMaxEnumValForKernelVariant()),
              spellings<StorageType>(getMaxEnumValForStorageType()),
              spellings<SpikeStorage>(getMaxEnumValForSpikeStorage())),
          getTargetFields()})
      for (Field &field : more)
        all.push_back(std::move(field));
    return all;
  }();
  return fields;
}

const Field *findField(StringRef object, StringRef name) {
  for (const Field &field : getFields())
    if (field.object == object && field.name == name)
      return &field;
  return nullptr;
}

/// "request.kernels.variants".
std::string where(StringRef object, StringRef name) {
  std::string path = "request";
  if (!object.empty())
    path += "." + object.str();
  if (!name.empty())
    path += "." + name.str();
  return path;
}

std::string spelled(const json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

/// Checks a request's JSON against the field table, reporting the first
/// misfit, then reads the checked values.
class RequestReader {
public:
  explicit RequestReader(function_ref<void(const Twine &)> error)
      : error(error) {}

  /// Checks `object` (at `path` in the table) and the objects it holds.
  bool check(const json::Object &object, StringRef path) {
    for (const auto &[key, value] : object) {
      const Field *field = findField(path, key);
      if (!field) {
        std::vector<std::string> known;
        for (const Field &candidate : getFields())
          if (candidate.object == path)
            known.push_back(candidate.name.str());
        return fail(where(path, key.str()) + ": no such field (the fields: " +
                    llvm::join(known, ", ") + ")");
      }
      if (!checkValue(*field, value))
        return false;
      if (field->type == FieldType::Object) {
        std::string inner =
            path.empty() ? key.str() : (path + "." + key.str()).str();
        if (!check(*value.getAsObject(), inner))
          return false;
      }
    }
    if (path.empty() && !object.get("version"))
      return fail("request.version: missing (this build reads version " +
                  std::to_string(kCompileRequestVersion) + ")");
    return true;
  }

private:
  bool fail(const Twine &message) {
    error(message);
    return false;
  }

  bool checkEnum(const Field &field, const json::Value &value,
                 const Twine &at) {
    std::optional<StringRef> text = value.getAsString();
    if (!text)
      return fail(at + ": expected a string, got " + spelled(value));
    if (!llvm::is_contained(field.values, *text))
      return fail(at + ": '" + *text + "' is not one of " +
                  llvm::join(field.values, ", "));
    return true;
  }

  bool checkValue(const Field &field, const json::Value &value) {
    std::string at = where(field.object, field.name);
    switch (field.type) {
    case FieldType::Version: {
      std::optional<int64_t> version = value.getAsInteger();
      if (!version || *version != kCompileRequestVersion)
        return fail(at + ": " + spelled(value) +
                    " is not a version this build reads (" +
                    std::to_string(kCompileRequestVersion) + ")");
      return true;
    }
    case FieldType::Bool:
      if (!value.getAsBoolean())
        return fail(at + ": expected true or false, got " + spelled(value));
      return true;
    case FieldType::Count: {
      std::optional<int64_t> count = value.getAsInteger();
      if (!count || *count < 0 || *count > UINT32_MAX)
        return fail(at + ": expected a non-negative integer, got " +
                    spelled(value));
      return true;
    }
    case FieldType::Text:
      if (!value.getAsString())
        return fail(at + ": expected a string, got " + spelled(value));
      return true;
    case FieldType::Texts:
    case FieldType::Enums:
      return checkList(field, value, at);
    case FieldType::Values:
    case FieldType::EnumMap:
      return checkMap(field, value, at);
    case FieldType::Object:
      if (!value.getAsObject())
        return fail(at + ": expected an object, got " + spelled(value));
      return true;
    }
    llvm_unreachable("a field type");
  }

  bool checkList(const Field &field, const json::Value &value,
                 const std::string &at) {
    const json::Array *items = value.getAsArray();
    if (!items)
      return fail(at + ": expected a list, got " + spelled(value));
    for (auto [i, item] : llvm::enumerate(*items)) {
      std::string itemAt = at + "[" + std::to_string(i) + "]";
      if (field.type == FieldType::Enums) {
        if (!checkEnum(field, item, itemAt))
          return false;
      } else if (!item.getAsString()) {
        return fail(itemAt + ": expected a string, got " + spelled(item));
      }
    }
    return true;
  }

  bool checkMap(const Field &field, const json::Value &value,
                const std::string &at) {
    const json::Object *entries = value.getAsObject();
    if (!entries)
      return fail(at + ": expected an object of parameter names, got " +
                  spelled(value));
    for (const auto &[name, entry] : *entries) {
      std::string entryAt = at + "." + name.str();
      if (field.type == FieldType::EnumMap) {
        if (!checkEnum(field, entry, entryAt))
          return false;
      } else if (!entry.getAsNumber() && !entry.getAsBoolean()) {
        return fail(entryAt + ": expected a number or true/false, got " +
                    spelled(entry));
      }
    }
    return true;
  }

  function_ref<void(const Twine &)> error;
};

const json::Object *getObject(const json::Object *object, StringRef name) {
  return object ? object->getObject(name) : nullptr;
}

SmallVector<std::string> getTexts(const json::Array &items) {
  SmallVector<std::string> texts;
  for (const json::Value &item : items)
    texts.push_back(item.getAsString()->str());
  return texts;
}

template <typename EnumT>
SmallVector<EnumT> getEnums(const json::Array &items) {
  SmallVector<EnumT> values;
  for (const json::Value &item : items)
    values.push_back(*symbolizeEnum<EnumT>(*item.getAsString()));
  return values;
}

/// `name=value` entries, as flexsn-set-params takes them.
SmallVector<std::string> getAssignments(const json::Object &entries) {
  SmallVector<std::string> assignments;
  for (const auto &[name, entry] : entries) {
    std::string value;
    if (std::optional<bool> flag = entry.getAsBoolean())
      value = *flag ? "true" : "false";
    else if (std::optional<int64_t> integer = entry.getAsInteger())
      value = std::to_string(*integer);
    else if (std::optional<StringRef> text = entry.getAsString())
      value = text->str();
    else
      value = formatShortest(*entry.getAsNumber());
    assignments.push_back(name.str() + "=" + value);
  }
  // JSON objects are unordered: the pass sees the names sorted.
  llvm::sort(assignments);
  return assignments;
}

FlexSNSetParamsOptions readConfigure(const json::Object &object) {
  FlexSNSetParamsOptions options;
  if (const json::Array *neurons = object.getArray("neurons"))
    options.neurons = getTexts(*neurons);
  if (const json::Object *values = object.getObject("values"))
    options.values = getAssignments(*values);
  if (const json::Object *kinds = object.getObject("kinds"))
    options.kinds = getAssignments(*kinds);
  if (const json::Object *shapes = object.getObject("shapes"))
    options.shapes = getAssignments(*shapes);
  if (std::optional<StringRef> surrogate = object.getString("surrogate"))
    options.surrogate = surrogate->str();
  return options;
}

/// The `kernels` object's fields, which every target's options take.
template <typename Derived>
void readKernels(const json::Object *kernels, KernelOptions<Derived> &options) {
  if (!kernels)
    return;
  // No neuron named means every neuron, as for configure's neurons.
  if (const json::Array *neurons = kernels->getArray("neurons");
      neurons && !neurons->empty()) {
    SmallVector<std::string> names = getTexts(*neurons);
    options.neurons = ArrayRef<std::string>(names);
  }
  if (const json::Array *variants = kernels->getArray("variants"))
    options.variants = getEnums<KernelVariant>(*variants);
  if (const json::Array *storage = kernels->getArray("storage_types"))
    options.storageTypes = getEnums<StorageType>(*storage);
  if (const json::Array *spikes = kernels->getArray("spike_storage"))
    options.spikeStorage = getEnums<SpikeStorage>(*spikes);
  if (std::optional<bool> save = kernels->getBoolean("save_in_storage_type"))
    options.saveInStorageType = *save;
  if (std::optional<bool> all = kernels->getBoolean("store_all"))
    options.storeAll = *all;
  if (std::optional<bool> fuse = kernels->getBoolean("fuse"))
    options.fuse = *fuse;
  if (std::optional<bool> coupled = kernels->getBoolean("coupled"))
    options.coupledKernels = *coupled;
}

std::unique_ptr<LowerToCPUOptions> readCPU(const json::Object &cpu,
                                           const json::Object *kernels) {
  auto options = std::make_unique<LowerToCPUOptions>();
  readKernels(kernels, *options);
  if (std::optional<bool> generate = cpu.getBoolean("generate_kernels"))
    options->generateKernels = *generate;
  if (std::optional<bool> parallel = cpu.getBoolean("parallel"))
    options->parallel = *parallel;
  if (std::optional<int64_t> width = cpu.getInteger("vector_width"))
    options->vectorWidth = static_cast<unsigned>(*width);
  return options;
}

std::unique_ptr<LowerToNVVMOptions> readCUDA(const json::Object &cuda,
                                             const json::Object *kernels) {
  auto options = std::make_unique<LowerToNVVMOptions>();
  readKernels(kernels, *options);
  if (const json::Array *chips = cuda.getArray("chips")) {
    SmallVector<std::string> names = getTexts(*chips);
    options->chips = ArrayRef<std::string>(names);
  }
  if (std::optional<StringRef> toolkit = cuda.getString("toolkit"))
    options->toolkit = toolkit->str();
  if (std::optional<StringRef> features = cuda.getString("features"))
    options->features = features->str();
  if (std::optional<int64_t> level = cuda.getInteger("opt_level"))
    options->optLevel = static_cast<unsigned>(*level);
  if (std::optional<bool> approximate =
          cuda.getBoolean("approximate_surrogates"))
    options->approximateSurrogates = *approximate;
  return options;
}

} // namespace

FailureOr<CompileRequest>
mlir::flexsn::parseCompileRequest(StringRef text,
                                  function_ref<void(const Twine &)> error) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    error("the request is not JSON: " + llvm::toString(parsed.takeError()));
    return failure();
  }
  const json::Object *request = parsed->getAsObject();
  if (!request) {
    error("the request is a JSON object, got " + spelled(*parsed));
    return failure();
  }
  RequestReader reader(error);
  if (!reader.check(*request, ""))
    return failure();

  CompileRequest result;
  if (const json::Object *configure = request->getObject("configure"))
    result.configure = readConfigure(*configure);
  result.neuronManifest =
      request->getBoolean("neuron_manifest").value_or(false);
  const json::Object *kernels = request->getObject("kernels");
  auto errorHandler = [&](const Twine &message) {
    error(message);
    return failure();
  };
  const json::Object *targets = request->getObject("targets");
  if (const json::Object *cpu = getObject(targets, "cpu")) {
    result.cpu = readCPU(*cpu, kernels);
    if (failed(checkLowerToCPUOptions(*result.cpu, errorHandler)))
      return failure();
  }
  if (const json::Object *cuda = getObject(targets, "cuda")) {
    result.cuda = readCUDA(*cuda, kernels);
    result.fatbin = cuda->getBoolean("fatbin").value_or(false);
    if (failed(checkLowerToNVVMOptions(*result.cuda, errorHandler)))
      return failure();
    if (result.cuda->chips.size() > 1 && !result.fatbin) {
      error("request.targets.cuda.chips: " + Twine(result.cuda->chips.size()) +
            " chips make one cubin each, which only a fatbin holds: set "
            "request.targets.cuda.fatbin");
      return failure();
    }
  }
  return result;
}

json::Value mlir::flexsn::getCompileRequestSchema() {
  json::Object objects;
  for (const Field &field : getFields()) {
    json::Object entry{{"type", typeName(field.type)},
                       {"default", field.defaultValue},
                       {"description", field.description}};
    if (!field.values.empty())
      entry["values"] = json::Array(field.values);
    json::Value &object = objects[field.object.str()];
    if (!object.getAsObject())
      object = json::Object();
    (*object.getAsObject())[field.name.str()] = std::move(entry);
  }
  return json::Object{{"version", kCompileRequestVersion},
                      {"objects", std::move(objects)}};
}
