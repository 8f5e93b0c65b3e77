# kpool_add_aot_kernels(<name>
#     TYPE bf16|f16|f32 HEAD_DIM <n> KPOOL <n>
#     [TARGET cpu|cuda] [CHIP sm_90] [ARGS <extra kpool-aot options>...])
#
# Compiles the four kpool kernels of one configuration ahead of time with
# kpool-aot into a static library <name>, whose interface carries the
# generated header <name>.h (plain C entry points `kpool_<type>_d<D>_k<K>_
# [cuda_]compress(const KPoolView *, ...)`, and for C++ `..._backend()`,
# `..._config()` and `..._register()` for kpool::KernelSet). The library
# needs no MLIR at run time: link KPoolRuntimeCore for validated calls, and
# the CUDA target links kpool_cuda_runtime (the mgpu* wrappers).
#
# KPOOL_AOT_EXECUTABLE names the kpool-aot to run (default: the in-tree
# target, or KPool::kpool-aot from an installed package).
function(kpool_add_aot_kernels name)
  cmake_parse_arguments(ARG "" "TYPE;HEAD_DIM;KPOOL;TARGET;CHIP" "ARGS" ${ARGN})
  foreach(required TYPE HEAD_DIM KPOOL)
    if(NOT ARG_${required})
      message(FATAL_ERROR "kpool_add_aot_kernels(${name}): ${required} is required")
    endif()
  endforeach()
  if(NOT ARG_TARGET)
    set(ARG_TARGET cpu)
  endif()
  if(KPOOL_AOT_EXECUTABLE)
    set(aot ${KPOOL_AOT_EXECUTABLE})
  elseif(TARGET kpool-aot)
    set(aot $<TARGET_FILE:kpool-aot>)
    set(aot_dep kpool-aot)
  elseif(TARGET KPool::kpool-aot)
    set(aot $<TARGET_FILE:KPool::kpool-aot>)
  else()
    message(FATAL_ERROR "kpool_add_aot_kernels: no kpool-aot found")
  endif()
  set(options --type=${ARG_TYPE} --head-dim=${ARG_HEAD_DIM} --kpool=${ARG_KPOOL}
              --target=${ARG_TARGET})
  if(ARG_CHIP)
    list(APPEND options --chip=${ARG_CHIP})
  endif()
  if(ARG_TARGET STREQUAL "cuda" AND CUDAToolkit_ROOT)
    list(APPEND options --cuda-toolkit=${CUDAToolkit_ROOT})
  endif()
  list(APPEND options ${ARG_ARGS})

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name})
  set(object ${dir}/${name}.o)
  set(header ${dir}/${name}.h)
  add_custom_command(
    OUTPUT ${object} ${header}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${aot} ${options} -o ${object} --header=${header}
    DEPENDS ${aot_dep}
    COMMENT "kpool-aot: ${ARG_TYPE}, head_dim ${ARG_HEAD_DIM}, kpool ${ARG_KPOOL}, ${ARG_TARGET}"
    VERBATIM)
  set_source_files_properties(${object} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${name} STATIC ${object} ${header})
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  target_include_directories(${name} INTERFACE ${dir})
  if(TARGET KPoolRuntimeCore)
    target_link_libraries(${name} INTERFACE KPoolRuntimeCore)
  elseif(TARGET KPool::KPoolRuntimeCore)
    target_link_libraries(${name} INTERFACE KPool::KPoolRuntimeCore)
  endif()
  if(ARG_TARGET STREQUAL "cuda")
    if(TARGET kpool_cuda_runtime)
      target_link_libraries(${name} INTERFACE kpool_cuda_runtime)
    elseif(TARGET KPool::kpool_cuda_runtime)
      target_link_libraries(${name} INTERFACE KPool::kpool_cuda_runtime)
    endif()
  endif()
endfunction()

# kpool_add_kernel_pack(<name>
#     CONFIGS <type>:<head_dim>:<kpool>[:<format>|:all]...
#     [TARGET cpu|cuda] [CHIP sm_90] [OUTPUT_DIRECTORY <dir>]
#     [ARGS <extra kpool-aot options>...])
#
# A kernel pack (kpool/ABI/KernelPack.h): one kpool-aot --pack run for every
# configuration (one MLIR context; kernels shared where they are the same),
# linked into the loadable module <name>.so, which needs no MLIR at run
# time (the CUDA target's needs libkpool_cuda_runtime, found next to the
# runtime through its RUNPATH, $ORIGIN/../..: install it in
# <lib>/kpool-packs/<target>/ for the runtime to load it by itself, or load
# it with kpoolLoadKernelPack / kpool.load_kernel_pack). <format> is none,
# element-<none|hadamard>, fp8-<none|hadamard>-<absmax|pow2>, or all (no
# cache and every format).
function(kpool_add_kernel_pack name)
  cmake_parse_arguments(ARG "" "TARGET;CHIP;OUTPUT_DIRECTORY" "CONFIGS;ARGS"
                        ${ARGN})
  if(NOT ARG_CONFIGS)
    message(FATAL_ERROR "kpool_add_kernel_pack(${name}): CONFIGS is required")
  endif()
  if(NOT ARG_TARGET)
    set(ARG_TARGET cpu)
  endif()
  if(KPOOL_AOT_EXECUTABLE)
    set(aot ${KPOOL_AOT_EXECUTABLE})
  elseif(TARGET kpool-aot)
    set(aot $<TARGET_FILE:kpool-aot>)
    set(aot_dep kpool-aot)
  elseif(TARGET KPool::kpool-aot)
    set(aot $<TARGET_FILE:KPool::kpool-aot>)
  else()
    message(FATAL_ERROR "kpool_add_kernel_pack: no kpool-aot found")
  endif()
  set(options --pack --target=${ARG_TARGET})
  foreach(config ${ARG_CONFIGS})
    list(APPEND options --config=${config})
  endforeach()
  if(ARG_CHIP)
    list(APPEND options --chip=${ARG_CHIP})
  endif()
  if(ARG_TARGET STREQUAL "cuda" AND CUDAToolkit_ROOT)
    list(APPEND options --cuda-toolkit=${CUDAToolkit_ROOT})
  endif()
  list(APPEND options ${ARG_ARGS})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name})
  set(object ${dir}/${name}.o)
  add_custom_command(
    OUTPUT ${object}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${aot} ${options} -o ${object}
    DEPENDS ${aot_dep}
    COMMENT "kpool-aot --pack: ${name} (${ARG_TARGET}: ${ARG_CONFIGS})"
    VERBATIM)
  set_source_files_properties(${object} PROPERTIES EXTERNAL_OBJECT TRUE
                                                   GENERATED TRUE)
  add_library(${name} MODULE ${object})
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C PREFIX "")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  endif()
  if(ARG_TARGET STREQUAL "cuda")
    if(TARGET kpool_cuda_runtime)
      target_link_libraries(${name} PRIVATE kpool_cuda_runtime)
    elseif(TARGET KPool::kpool_cuda_runtime)
      target_link_libraries(${name} PRIVATE KPool::kpool_cuda_runtime)
    endif()
    set_target_properties(${name} PROPERTIES
      BUILD_WITH_INSTALL_RPATH ON
      INSTALL_RPATH "\$ORIGIN/../..")
  endif()
  target_link_options(${name} PRIVATE "LINKER:-z,defs")
endfunction()
