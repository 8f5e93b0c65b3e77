# Helpers for the GPU executables of the tests, examples and benchmarks
# (kpool-gpu-check, kpool-gpu-demo, kpool-bench-gpu). Not installed: they
# link the test support library test/lib/GPU.
#
# kpool_add_gpu_kernels(<type>:<head_dim>:<kpool> ...)
#   For each configuration, the ahead-of-time kernels that the GPU
#   executables link: kpool_gpu_cpu_<type>_d<D>_k<K> (CPU kernels, for the
#   CPU emulation, always) and kpool_gpu_<type>_d<D>_k<K> (CUDA kernels,
#   where kpool_cuda_runtime is built). Each is one kpool-aot run. A fourth
#   field, <type>:<D>:<K>:<entry>-<rotate>[-<scale>] (e.g.
#   bf16:128:4:fp8-hadamard-absmax), adds that pool-cache format's kernels
#   and the suffix _<entry>_<rotate>[_<scale>] to the names.
#
# kpool_add_gpu_executable(<name> SOURCES <src>... KERNELS <type_dD_kK>...
#                          [EMULATED_EXCLUDE_FROM_ALL])
#   <name>-emulated: the program over the CPU kernels with host memory
#   standing in for device memory (KPOOL_GPU_ON_CPU, test/lib/GPU), built
#   everywhere; and <name>, the program over the CUDA kernels, where
#   kpool_cuda_runtime is built. Both land in <build>/bin; <name> finds
#   libkpool_cuda_runtime.so next to itself (the GPU pack) or in ../lib.

function(kpool_add_gpu_kernels)
  foreach(entry ${ARGN})
    string(REPLACE ":" ";" config ${entry})
    list(GET config 0 type)
    list(GET config 1 dim)
    list(GET config 2 pool)
    set(suffix "")
    set(args "")
    list(LENGTH config fields)
    if(fields GREATER 3)
      # A pool-cache format <entry>-<rotate>[-<scale>], e.g.
      # fp8-hadamard-absmax: the set also has the *_cache kernels.
      list(GET config 3 format)
      string(REPLACE "-" ";" parts ${format})
      list(GET parts 0 cache_entry)
      list(GET parts 1 cache_rotate)
      set(args --cache=${cache_entry} --rotate=${cache_rotate})
      string(REPLACE "-" "_" suffix "_${format}")
      list(LENGTH parts nparts)
      if(nparts GREATER 2)
        list(GET parts 2 cache_scale)
        list(APPEND args --scale=${cache_scale})
      endif()
    endif()
    kpool_add_aot_kernels(kpool_gpu_cpu_${type}_d${dim}_k${pool}${suffix}
      TYPE ${type} HEAD_DIM ${dim} KPOOL ${pool} TARGET cpu ARGS ${args})
    if(TARGET kpool_cuda_runtime)
      kpool_add_aot_kernels(kpool_gpu_${type}_d${dim}_k${pool}${suffix}
        TYPE ${type} HEAD_DIM ${dim} KPOOL ${pool} TARGET cuda ARGS ${args})
    endif()
  endforeach()
endfunction()

function(kpool_add_gpu_executable name)
  cmake_parse_arguments(ARG "EMULATED_EXCLUDE_FROM_ALL" "" "SOURCES;KERNELS"
                        ${ARGN})
  set(cpu_kernels)
  set(cuda_kernels)
  foreach(config ${ARG_KERNELS})
    list(APPEND cpu_kernels kpool_gpu_cpu_${config})
    list(APPEND cuda_kernels kpool_gpu_${config})
  endforeach()

  add_executable(${name}-emulated ${ARG_SOURCES})
  target_link_libraries(${name}-emulated PRIVATE
    KPoolGpuSupportEmulated ${cpu_kernels})
  set_target_properties(${name}-emulated PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${LLVM_RUNTIME_OUTPUT_INTDIR}
    FOLDER "Tests")
  if(ARG_EMULATED_EXCLUDE_FROM_ALL)
    set_target_properties(${name}-emulated PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()

  if(NOT TARGET kpool_cuda_runtime)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE KPoolGpuSupport ${cuda_kernels})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${LLVM_RUNTIME_OUTPUT_INTDIR}
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "\$ORIGIN:\$ORIGIN/../lib"
    FOLDER "Tests")
endfunction()
