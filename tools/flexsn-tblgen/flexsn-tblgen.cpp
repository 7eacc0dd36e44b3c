//===- flexsn-tblgen.cpp - FlexSN's TableGen backends ---------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The TableGen backend of the compile options
// (include/flexsn/Pipelines/CompileRequest.td):
//
//   -gen-compile-request-fields   the request's field table
//                                 (GEN_REQUEST_FIELDS), the pipelines' option
//                                 members (GEN_KERNEL_OPTIONS,
//                                 GEN_CPU_OPTIONS, GEN_CUDA_OPTIONS) and the
//                                 readers storing a request's fields into
//                                 them (GEN_REQUEST_READERS)
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Main.h"
#include "llvm/TableGen/Record.h"
#include "llvm/TableGen/TableGenBackend.h"

using namespace llvm;

namespace {

enum class Action { CompileRequestFields, EnumOptionParsers };

cl::opt<Action> action(
    cl::desc("What to generate"),
    cl::values(clEnumValN(Action::CompileRequestFields,
                          "gen-compile-request-fields",
                          "The compile request's field table and readers"),
               clEnumValN(Action::EnumOptionParsers, "gen-enum-option-parsers",
                          "The command-line parsers of the enums that "
                          "options take (FlexSN_OptionEnums)")));

void emitString(raw_ostream &os, StringRef text) {
  os << '"';
  os.write_escaped(text);
  os << '"';
}

/// The fields in the order they are declared (the order a request's
/// errors list an object's fields in).
std::vector<const Record *> getFields(const RecordKeeper &records) {
  std::vector<const Record *> fields(
      records.getAllDerivedDefinitions("RequestField"));
  llvm::sort(fields, [](const Record *a, const Record *b) {
    return a->getID() < b->getID();
  });
  return fields;
}

/// The enum a field holds the cases of, or null.
const Record *getEnum(const Record *field) {
  const RecordVal *values = field->getValue("values");
  if (!values || !values->getValue()->isComplete())
    return nullptr;
  return field->getValueAsDef("values");
}

/// The spellings of an ODS enum's cases, by value (stringifyEnum's).
std::vector<std::pair<int64_t, StringRef>> getSpellings(const Record *e) {
  std::vector<std::pair<int64_t, StringRef>> cases;
  for (const Record *c : e->getValueAsListOfDefs("enumerants"))
    cases.emplace_back(c->getValueAsInt("value"), c->getValueAsString("str"));
  llvm::sort(cases);
  return cases;
}

void emitTable(ArrayRef<const Record *> fields, raw_ostream &os) {
  os << "#ifdef GEN_REQUEST_FIELDS\n#undef GEN_REQUEST_FIELDS\n\n"
     << "/// Every field of a request, as CompileRequest.td declares them.\n"
     << "std::vector<Field> getDeclaredFields() {\n  return {\n";
  for (const Record *field : fields) {
    if (!field->getValueAsBit("inRequest"))
      continue;
    StringRef type = field->getValueAsDef("type")->getValueAsString("name");
    const Record *e = getEnum(field);
    if (e && type != "Enums" && type != "EnumMap")
      PrintFatalError(field->getLoc(), "only an Enums or EnumMap field "
                                       "names the enum of its values");
    if (!e && (type == "Enums" || type == "EnumMap"))
      PrintFatalError(field->getLoc(),
                      "an " + type + " field names its enum (values)");
    os << "      {";
    emitString(os, field->getValueAsString("object"));
    os << ", ";
    emitString(os, field->getValueAsString("name"));
    os << ", FieldType::" << type << ", {";
    if (e)
      llvm::interleaveComma(getSpellings(e), os,
                            [&](const auto &c) { emitString(os, c.second); });
    os << "}, " << field->getValueAsString("defaultValue").trim() << ", ";
    emitString(os, field->getValueAsString("description"));
    os << "},\n";
  }
  os << "  };\n}\n\n#endif // GEN_REQUEST_FIELDS\n\n";
}

/// The statement storing `field` of `object` into `options.<member>`.
void emitRead(const Record *field, raw_ostream &os) {
  StringRef type = field->getValueAsDef("type")->getValueAsString("name");
  StringRef member = field->getValueAsString("member");
  std::string name;
  {
    raw_string_ostream quoted(name);
    emitString(quoted, field->getValueAsString("name"));
  }
  if (type == "Bool") {
    os << "  if (std::optional<bool> value = object.getBoolean(" << name
       << "))\n    options." << member << " = *value;\n";
  } else if (type == "Count") {
    os << "  if (std::optional<int64_t> value = object.getInteger(" << name
       << "))\n    options." << member << " = static_cast<unsigned>(*value);\n";
  } else if (type == "Text") {
    os << "  if (std::optional<StringRef> value = object.getString(" << name
       << "))\n    options." << member << " = value->str();\n";
  } else if (type == "Texts") {
    os << "  if (const json::Array *value = object.getArray(" << name
       << ")) {\n    SmallVector<std::string> texts = getTexts(*value);\n"
       << "    options." << member << " = ArrayRef<std::string>(texts);\n"
       << "  }\n";
  } else if (type == "Enums") {
    os << "  if (const json::Array *value = object.getArray(" << name
       << "))\n    options." << member << " = getEnums<"
       << getEnum(field)->getValueAsString("className") << ">(*value);\n";
  } else {
    PrintFatalError(field->getLoc(),
                    "a " + type +
                        " field has no generated reader: leave its "
                        "member empty and read it by hand");
  }
}

/// The options structs a PipelineOption names, with the signature of the
/// reader of their fields and the macro their members are generated under.
struct OptionsStruct {
  StringRef name, reader, macro;
};
const OptionsStruct kOptionsStructs[] = {
    {"kernels",
     "template <typename Derived>\nvoid readKernelMembers(const json::Object "
     "&object, KernelOptions<Derived> &options)",
     "GEN_KERNEL_OPTIONS"},
    {"cpu",
     "void readCPUMembers(const json::Object &object, LowerToCPUOptions "
     "&options)",
     "GEN_CPU_OPTIONS"},
    {"cuda",
     "void readCUDAMembers(const json::Object &object, LowerToNVVMOptions "
     "&options)",
     "GEN_CUDA_OPTIONS"}};

bool isOption(const Record *field, StringRef options) {
  return field->isSubClassOf("PipelineOption") &&
         field->getValueAsString("options") == options;
}

void checkOptions(ArrayRef<const Record *> fields) {
  for (const Record *field : fields) {
    if (!field->isSubClassOf("PipelineOption")) {
      if (!field->getValueAsBit("inRequest") ||
          field->getValueAsBit("readByHand"))
        PrintFatalError(field->getLoc(), "only a PipelineOption is read by "
                                         "hand or left out of requests");
      continue;
    }
    StringRef options = field->getValueAsString("options");
    if (llvm::none_of(kOptionsStructs, [&](const OptionsStruct &o) {
          return o.name == options;
        }))
      PrintFatalError(field->getLoc(), "unknown options '" + options + "'");
  }
}

/// The member declaration of a PipelineOption field.
void emitMember(const Record *field, raw_ostream &os) {
  StringRef type = field->getValueAsDef("type")->getValueAsString("name");
  std::string option;
  if (type == "Bool")
    option = "Option<bool>";
  else if (type == "Count")
    option = "Option<unsigned>";
  else if (type == "Text")
    option = "Option<std::string>";
  else if (type == "Texts")
    option = "ListOption<std::string>";
  else if (type == "Enums")
    option =
        ("ListOption<" + getEnum(field)->getValueAsString("className") + ">")
            .str();
  else
    PrintFatalError(field->getLoc(), "a " + type +
                                         " field is no pipeline "
                                         "option");
  os << "::mlir::detail::PassOptions::" << option << " "
     << field->getValueAsString("member") << "{\n    *this, ";
  emitString(os, field->getValueAsString("passOption"));
  os << ",\n    ::llvm::cl::desc(";
  emitString(os, field->getValueAsString("description"));
  os << ")";
  // A list's default is what the pipeline makes of no value.
  if (!StringRef(option).starts_with("ListOption"))
    os << ",\n    ::llvm::cl::init("
       << field->getValueAsString("defaultValue").trim() << ")";
  os << "};\n";
}

void emitMembers(ArrayRef<const Record *> fields, raw_ostream &os) {
  for (const OptionsStruct &options : kOptionsStructs) {
    os << "#ifdef " << options.macro << "\n#undef " << options.macro << "\n\n";
    for (const Record *field : fields)
      if (isOption(field, options.name))
        emitMember(field, os);
    os << "\n#endif // " << options.macro << "\n\n";
  }
}

void emitReaders(ArrayRef<const Record *> fields, raw_ostream &os) {
  os << "#ifdef GEN_REQUEST_READERS\n#undef GEN_REQUEST_READERS\n\n";
  for (const OptionsStruct &options : kOptionsStructs) {
    os << "/// The " << options.name
       << " fields a request holds, stored in their options.\n"
       << options.reader << " {\n";
    for (const Record *field : fields)
      if (isOption(field, options.name) && field->getValueAsBit("inRequest") &&
          !field->getValueAsBit("readByHand"))
        emitRead(field, os);
    os << "}\n\n";
  }
  os << "#endif // GEN_REQUEST_READERS\n";
}

/// The passes the fields' `passes` name, in first-named order.
SmallVector<StringRef> getForwardedPasses(ArrayRef<const Record *> fields) {
  SmallVector<StringRef> passes;
  for (const Record *field : fields)
    if (field->isSubClassOf("PipelineOption"))
      for (StringRef pass : field->getValueAsListOfStrings("passes"))
        if (!llvm::is_contained(passes, pass))
          passes.push_back(pass);
  return passes;
}

bool isForwardedTo(const Record *field, StringRef pass) {
  return field->isSubClassOf("PipelineOption") &&
         llvm::is_contained(field->getValueAsListOfStrings("passes"), pass);
}

/// The member as a json::Value expression: a list of its strings (enum
/// cases spelled as in requests), or its value.
std::string getJsonValue(const Record *field) {
  StringRef type = field->getValueAsDef("type")->getValueAsString("name");
  std::string member = ("options." + field->getValueAsString("member")).str();
  if (type == "Enums")
    return "spellList(" + member + ", [](auto value) { return " +
           getEnum(field)->getValueAsString("symbolToStringFnName").str() +
           "(value); })";
  if (type == "Texts")
    return "spellList(" + member + ", [](StringRef text) { return text; })";
  if (type == "Count")
    return "json::Value(int64_t(" + member + "))";
  return "json::Value(" + member + ".getValue())";
}

/// For each pass some field names: the copy of the members it takes, and
/// the check for a pipeline that does not run it. Included where the
/// passes' options structs are declared, with `spellList(list, spell)` (a
/// json::Array of the spelled items) and `formatOption(name, value)` (its
/// pass-option text) in scope.
void emitForwarding(ArrayRef<const Record *> fields, raw_ostream &os) {
  os << "#ifdef GEN_PASS_FORWARDING\n#undef GEN_PASS_FORWARDING\n\n";
  for (StringRef pass : getForwardedPasses(fields)) {
    os << "/// Copies into `pass` the members " << pass
       << " takes as they are.\ntemplate <typename Options>\nvoid forwardTo"
       << pass << "(const Options &options, " << pass << "Options &pass) {\n";
    for (const Record *field : fields) {
      if (!isForwardedTo(field, pass))
        continue;
      StringRef member = field->getValueAsString("member");
      StringRef type = field->getValueAsDef("type")->getValueAsString("name");
      if (type == "Enums" || type == "Texts")
        os << "  pass." << member << ".assign(options." << member
           << ".begin(), options." << member << ".end());\n";
      else
        os << "  pass." << member << " = options." << member << ";\n";
    }
    os << "}\n\n";
    auto onlyFor = [&](const Record *field) {
      return isForwardedTo(field, pass) &&
             field->getValueAsListOfStrings("passes").size() == 1;
    };
    if (llvm::none_of(fields, onlyFor))
      continue;
    os << "/// The pass-option text of a member only " << pass
       << " reads, set away from its default (an empty list is the "
          "default too), or none.\ntemplate <typename Options>\n"
          "std::optional<std::string> getOptionUnusedWithout"
       << pass << "(const Options &options) {\n";
    for (const Record *field : fields) {
      if (!onlyFor(field))
        continue;
      StringRef type = field->getValueAsDef("type")->getValueAsString("name");
      bool list = type == "Enums" || type == "Texts";
      os << "  if (json::Value value = " << getJsonValue(field) << ";\n      "
         << (list ? "!value.getAsArray()->empty() && " : "")
         << "value != json::Value("
         << field->getValueAsString("defaultValue").trim() << "))\n"
         << "    return formatOption(";
      emitString(os, field->getValueAsString("passOption"));
      os << ", value);\n";
    }
    os << "  return std::nullopt;\n}\n\n";
  }
  // The kernel options' lists, for checks of every list alike.
  os << "/// `check` applied to every list member of the kernel options.\n"
        "template <typename Options, typename Check>\n"
        "auto applyToKernelLists(const Options &options, Check check) {\n"
        "  return check(";
  SmallVector<std::string> lists;
  for (const Record *field : fields) {
    StringRef type = field->getValueAsDef("type")->getValueAsString("name");
    if (isOption(field, "kernels") && (type == "Enums" || type == "Texts"))
      lists.push_back(("options." + field->getValueAsString("member")).str());
  }
  llvm::interleaveComma(lists, os);
  os << ");\n}\n\n#endif // GEN_PASS_FORWARDING\n\n";
}

bool emitCompileRequestFields(raw_ostream &os, const RecordKeeper &records) {
  emitSourceFileHeader("The compile request's fields", os, records);
  std::vector<const Record *> fields = getFields(records);
  checkOptions(fields);
  emitTable(fields, os);
  emitMembers(fields, os);
  emitReaders(fields, os);
  emitForwarding(fields, os);
  return false;
}

/// llvm::cl's parser of each enum FlexSN_OptionEnums lists: an
/// EnumOptionParser over its cases (EnumOptions.h includes this).
bool emitEnumOptionParsers(raw_ostream &os, const RecordKeeper &records) {
  emitSourceFileHeader("The option parsers of the dialect's enums", os,
                       records);
  os << "namespace llvm::cl {\n";
  for (const Record *list :
       records.getAllDerivedDefinitions("FlexSN_OptionEnums"))
    for (const Record *e : list->getValueAsListOfDefs("enums")) {
      std::string type = (e->getValueAsString("cppNamespace") +
                          "::" + e->getValueAsString("className"))
                             .str();
      os << "template <>\nclass parser<" << type
         << ">\n    : public ::mlir::flexsn::EnumOptionParser<\n          "
         << type << ", " << e->getValueAsString("cppNamespace")
         << "::getMaxEnumValFor" << e->getValueAsString("className")
         << "()> {\npublic:\n  using EnumOptionParser::EnumOptionParser;\n"
            "};\n";
    }
  os << "} // namespace llvm::cl\n";
  return false;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "FlexSN's TableGen backends\n");
  return TableGenMain(argv[0],
                      [](raw_ostream &os, const RecordKeeper &records) {
                        switch (action) {
                        case Action::CompileRequestFields:
                          return emitCompileRequestFields(os, records);
                        case Action::EnumOptionParsers:
                          return emitEnumOptionParsers(os, records);
                        }
                        return true;
                      });
}
