//===- CompileRequest.cpp - One compile's options, typed -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The reader that checks a compile request against its fields, declared
// once in CompileRequest.td (the table and the readers of the fields that
// name an options member are generated from it: CompileRequest.inc), and
// fills the pipelines' typed options. Enum-valued fields take the
// spellings of the dialect's ODS enums.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Targets/Target.h"

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

struct Field {
  /// The object holding the field: "" for the request itself, else a
  /// dotted path of `Object` fields ("targets.cuda").
  StringRef object;
  StringRef name;
  FieldType type;
  /// What an enum-valued field may hold: its ODS enum's spellings.
  std::vector<std::string> values;
  /// The value a request that leaves the field out gets; null where that
  /// depends on the target (the description says how).
  json::Value defaultValue;
  StringRef description;
};

#define GEN_REQUEST_FIELDS
#include "flexsn/Pipelines/CompileRequest.inc"

/// Every field of a request. The pipelines' option structs are where each
/// option's effect is implemented; CompileRequest.td is where a request
/// names them, and the only place that lists them.
const std::vector<Field> &getFields() {
  static const std::vector<Field> fields = getDeclaredFields();
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
      if (path == "targets") {
        if (!checkTarget(key, value))
          return false;
        continue;
      }
      const Field *field = findField(path, key);
      if (!field) {
        std::vector<std::string> known;
        for (const Field &candidate : getFields())
          if (candidate.object == path)
            known.push_back(candidate.name.str());
        return fail(where(path, key.str()) + ": no such field (" +
                    (known.empty() ? "it has none"
                                   : "the fields: " + llvm::join(known, ", ")) +
                    ")");
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
  /// `targets.<name>`: a registered target's section, holding its fields.
  bool checkTarget(StringRef name, const json::Value &value) {
    if (!lookupTarget(name)) {
      std::vector<std::string> known;
      for (Target *target : getTargets())
        if (!target->isForTesting())
          known.push_back(target->getName().str());
      return fail(where("targets", name) + ": no such target (the targets: " +
                  llvm::join(known, ", ") + ")");
    }
    const json::Object *section = value.getAsObject();
    if (!section)
      return fail(where("targets", name) + ": expected an object, got " +
                  spelled(value));
    return check(*section, ("targets." + name).str());
  }

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

#define GEN_REQUEST_READERS
#include "flexsn/Pipelines/CompileRequest.inc"

/// The `kernels` object's fields, which every target's options take.
template <typename Derived>
void readKernels(const json::Object &kernels, KernelOptions<Derived> &options) {
  // No neuron named means every neuron, as for configure's neurons.
  if (const json::Array *neurons = kernels.getArray("neurons");
      neurons && !neurons->empty()) {
    SmallVector<std::string> names = getTexts(*neurons);
    options.neurons = ArrayRef<std::string>(names);
  }
  readKernelMembers(kernels, options);
}

} // namespace

FailureOr<std::unique_ptr<LowerToCPUOptions>>
mlir::flexsn::readLowerToCPUOptions(
    const json::Object &cpu, const json::Object &kernels,
    function_ref<LogicalResult(const Twine &)> error) {
  auto options = std::make_unique<LowerToCPUOptions>();
  readKernels(kernels, *options);
  readCPUMembers(cpu, *options);
  if (failed(checkLowerToCPUOptions(*options, error)))
    return failure();
  return options;
}

FailureOr<std::unique_ptr<LowerToNVVMOptions>>
mlir::flexsn::readLowerToNVVMOptions(
    const json::Object &cuda, const json::Object &kernels,
    function_ref<LogicalResult(const Twine &)> error) {
  auto options = std::make_unique<LowerToNVVMOptions>();
  readKernels(kernels, *options);
  readCUDAMembers(cuda, *options);
  if (failed(checkLowerToNVVMOptions(*options, error)))
    return failure();
  return options;
}

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
  if (const json::Object *kernels = request->getObject("kernels"))
    result.kernels = *kernels;
  // In the registry's order, so that a compile does not depend on the
  // order of a JSON object's keys.
  if (const json::Object *targets = request->getObject("targets"))
    for (Target *target : getTargets())
      if (const json::Object *section = targets->getObject(target->getName()))
        result.targets.emplace_back(target->getName().str(), *section);
  return result;
}

static void addSchemaEntry(json::Object &objects, StringRef object,
                           StringRef name, json::Object entry) {
  json::Value &fields = objects[object.str()];
  if (!fields.getAsObject())
    fields = json::Object();
  (*fields.getAsObject())[name.str()] = std::move(entry);
}

json::Value mlir::flexsn::getCompileRequestSchema() {
  json::Object objects;
  for (const Field &field : getFields()) {
    json::Object entry{{"type", typeName(field.type)},
                       {"default", field.defaultValue},
                       {"description", field.description}};
    if (!field.values.empty())
      entry["values"] = json::Array(field.values);
    addSchemaEntry(objects, field.object, field.name, std::move(entry));
  }
  // A request names a target by its registered name; the targets of
  // FlexSN's tests are no part of the format.
  for (Target *target : getTargets())
    if (!target->isForTesting())
      addSchemaEntry(objects, "targets", target->getName(),
                     json::Object{{"type", typeName(FieldType::Object)},
                                  {"default", nullptr},
                                  {"description", target->getDescription()}});
  return json::Object{{"version", kCompileRequestVersion},
                      {"objects", std::move(objects)}};
}
