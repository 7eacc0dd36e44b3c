// Compile-request fields flexsn-tblgen refuses, one per macro
// (tblgen-compile-request.test).
include "flexsn/Pipelines/CompileRequest.td"

#ifdef ENUMS_WITHOUT_ENUM
def : RequestField<"kernels", "extra", RequestEnums, [{nullptr}], "x">;
#endif
#ifdef ENUM_ON_A_BOOL
def : RequestField<"kernels", "extra", RequestBool, [{false}], "x"> {
  let values = FlexSN_KernelVariant;
}
#endif
#ifdef MEMBER_WITHOUT_OPTIONS
def : RequestField<"kernels", "extra", RequestBool, [{false}], "x"> {
  let member = "extra";
}
#endif
#ifdef UNKNOWN_OPTIONS
def : RequestField<"kernels", "extra", RequestBool, [{false}], "x"> {
  let options = "rocm";
  let member = "extra";
}
#endif
#ifdef MAP_WITH_A_MEMBER
def : RequestField<"configure", "extra", RequestValues, [{json::Object()}],
                   "x"> {
  let options = "kernels";
  let member = "extra";
}
#endif
