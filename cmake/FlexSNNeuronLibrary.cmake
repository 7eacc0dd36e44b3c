# flexsn_add_neuron_library(<target> NEURONS <file.mlir>...
#     [CHIPS <sm_XX>...] [VARIANTS <variant>...] [STORAGE_TYPES <f32|f16|bf16>...]
#     [SPIKE_STORAGE <dense|u8|bits>...] [CPU] [NO_GPU])
#
# Compiles each neuron file at build time (editing it rebuilds) into
# <target>'s include directory:
#   <name>.h       GPU kernels for CHIPS (default: flexsn-lower-to-nvvm's),
#                  embedded, with typed launch functions (--flexsn-to-header);
#                  links FlexSN::runtime. NO_GPU leaves them out.
#   <name>_cpu.h   with CPU: the CPU kernels' functions (--flexsn-to-host-header),
#                  their object (--flexsn-to-host-object) in <target>, which
#                  then links libm and LLVM's OpenMP runtime.
# <name> is the file's name without its last extension (lif.v2.mlir:
# lif.v2); two NEURONS of one name are an error. VARIANTS, STORAGE_TYPES
# and SPIKE_STORAGE are the pipelines' options of those names.
function(flexsn_add_neuron_library target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "CPU;NO_GPU" ""
    "NEURONS;CHIPS;VARIANTS;STORAGE_TYPES;SPIKE_STORAGE")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "flexsn_add_neuron_library: unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NEURONS)
    message(FATAL_ERROR "flexsn_add_neuron_library(${target}): no NEURONS")
  endif()
  if(ARG_NO_GPU AND NOT ARG_CPU)
    message(FATAL_ERROR
      "flexsn_add_neuron_library(${target}): NO_GPU without CPU builds nothing")
  endif()
  if(NOT ARG_NO_GPU AND NOT EXISTS "${FLEXSN_CUDA_TOOLKIT}/bin/ptxas")
    message(FATAL_ERROR "flexsn_add_neuron_library(${target}): GPU kernels "
      "need a CUDA toolkit, and ${FLEXSN_CUDA_TOOLKIT} has no bin/ptxas: set "
      "FLEXSN_CUDA_TOOLKIT, or pass CPU NO_GPU")
  endif()

  # The pipelines' shared options, as one argument.
  set(options "")
  foreach(pair "variants;VARIANTS" "storage-types;STORAGE_TYPES"
               "spike-storage;SPIKE_STORAGE")
    list(GET pair 0 name)
    list(GET pair 1 key)
    if(ARG_${key})
      list(JOIN ARG_${key} "," values)
      string(APPEND options " ${name}=${values}")
    endif()
  endforeach()
  set(gpu_options "toolkit=${FLEXSN_CUDA_TOOLKIT}${options}")
  if(ARG_CHIPS)
    list(JOIN ARG_CHIPS "," chips)
    string(APPEND gpu_options " chip=${chips}")
  endif()
  string(STRIP "${options}" cpu_options)

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}")
  file(MAKE_DIRECTORY "${dir}")
  set(headers "")
  set(objects "")
  set(names "")
  foreach(neuron IN LISTS ARG_NEURONS)
    get_filename_component(source "${neuron}" ABSOLUTE)
    # The name without the last extension only: lif.v2.mlir is lif.v2.
    get_filename_component(name "${neuron}" NAME_WLE)
    if(name IN_LIST names)
      message(FATAL_ERROR "flexsn_add_neuron_library(${target}): two NEURONS "
        "are named '${name}' (${neuron} and an earlier one): their headers "
        "would both be ${name}.h; rename one")
    endif()
    list(APPEND names "${name}")
    if(NOT ARG_NO_GPU)
      add_custom_command(
        OUTPUT "${dir}/${name}.h"
        COMMAND FlexSN::flexsn-opt "${source}"
                "--flexsn-lower-to-nvvm=${gpu_options}" -o "${dir}/${name}.gpu.mlir"
        COMMAND FlexSN::flexsn-translate --flexsn-to-header
                "--flexsn-toolkit=${FLEXSN_CUDA_TOOLKIT}"
                "${dir}/${name}.gpu.mlir" -o "${dir}/${name}.h"
        DEPENDS "${source}" FlexSN::flexsn-opt FlexSN::flexsn-translate
        COMMENT "FlexSN: GPU kernels of ${name}"
        VERBATIM)
      list(APPEND headers "${dir}/${name}.h")
    endif()
    if(ARG_CPU)
      add_custom_command(
        OUTPUT "${dir}/${name}_cpu.h" "${dir}/${name}_cpu.o"
        COMMAND FlexSN::flexsn-opt "${source}"
                "--flexsn-lower-to-cpu=${cpu_options}" -o "${dir}/${name}.cpu.mlir"
        COMMAND FlexSN::flexsn-translate --flexsn-to-host-header
                "${dir}/${name}.cpu.mlir" -o "${dir}/${name}_cpu.h"
        COMMAND FlexSN::flexsn-translate --flexsn-to-host-object
                "${dir}/${name}.cpu.mlir" -o "${dir}/${name}_cpu.o"
        DEPENDS "${source}" FlexSN::flexsn-opt FlexSN::flexsn-translate
        COMMENT "FlexSN: CPU kernels of ${name}"
        VERBATIM)
      list(APPEND headers "${dir}/${name}_cpu.h")
      list(APPEND objects "${dir}/${name}_cpu.o")
    endif()
  endforeach()

  add_custom_target(${target}_kernels DEPENDS ${headers} ${objects})
  if(ARG_CPU)
    set_source_files_properties(${objects} PROPERTIES
      EXTERNAL_OBJECT TRUE GENERATED TRUE)
    add_library(${target} STATIC ${objects})
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
    target_include_directories(${target} PUBLIC "${dir}" "${FLEXSN_INCLUDE_DIR}")
    target_link_libraries(${target} PUBLIC "${FLEXSN_OPENMP_LIBRARY}" m)
    if(NOT ARG_NO_GPU)
      target_link_libraries(${target} PUBLIC FlexSN::runtime)
    endif()
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE "${dir}")
    target_link_libraries(${target} INTERFACE FlexSN::runtime)
  endif()
  add_dependencies(${target} ${target}_kernels)
endfunction()
