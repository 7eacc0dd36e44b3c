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
#ifdef BY_HAND_BUT_NO_OPTION
def : RequestField<"kernels", "extra", RequestBool, [{false}], "x"> {
  let readByHand = 1;
}
#endif
#ifdef UNKNOWN_OPTIONS
def : RequestField<"kernels", "extra", RequestBool, [{false}], "x">,
      PipelineOption<"rocm", "extra", "extra">;
#endif
#ifdef MAP_AS_AN_OPTION
def : RequestField<"configure", "extra", RequestValues, [{json::Object()}],
                   "x">,
      PipelineOption<"kernels", "extra", "extra">;
#endif
