# Helpers for the GPU executables of the tests, examples and benchmarks
# (kpool-gpu-check, kpool-gpu-demo, kpool-bench-gpu). Not installed: they
# link the test support library test/lib/GPU. Built where the CUDA toolkit
# is (kpool_cuda_runtime exists); they run on a GPU, or on any machine
# through the emulated CUDA driver of test/lib/CudaEmu (LD_LIBRARY_PATH=
# <build>/lib/cuda-emu), which executes the same PTX.
#
# kpool_add_gpu_kernels(<type>:<head_dim>:<kpool> ...)
#   For each configuration, the ahead-of-time CUDA kernels that the GPU
#   executables link, kpool_gpu_<type>_d<D>_k<K>: one kpool-aot run each. A
#   fourth field, <type>:<D>:<K>:<entry>-<rotate>[-<scale>] (e.g.
#   bf16:128:4:fp8-hadamard-absmax), adds that pool-cache format's kernels
#   and the suffix _<entry>_<rotate>[_<scale>] to the names.
#
# kpool_add_gpu_executable(<name> SOURCES <src>... KERNELS <type_dD_kK>...)
#   <name>, the program over the CUDA kernels, in <build>/bin; it finds
#   libkpool_cuda_runtime.so next to itself (the GPU pack) or in ../lib.

function(kpool_add_gpu_kernels)
  if(NOT TARGET kpool_cuda_runtime)
    return()
  endif()
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
    # As fatbins (PTX and an sm_90 cubin, which the CUDA driver chooses
    # between; the emulated driver takes the PTX). kpool's own GPU image,
    # kpool-aot's default (--format=ptx+cubin: the CUDA layer offers the
    # cubin, then the PTX), is what kernel packs and the JIT embed; their
    # tests run it (test/CAPI/kpool-capi-cuda.c, test/Python/cuda-emulated.test).
    kpool_add_aot_kernels(kpool_gpu_${type}_d${dim}_k${pool}${suffix}
      TYPE ${type} HEAD_DIM ${dim} KPOOL ${pool} TARGET cuda
      ARGS --format=fatbin ${args})
  endforeach()
endfunction()

function(kpool_add_gpu_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;KERNELS" ${ARGN})
  if(NOT TARGET kpool_cuda_runtime)
    return()
  endif()
  set(cuda_kernels)
  foreach(config ${ARG_KERNELS})
    list(APPEND cuda_kernels kpool_gpu_${config})
  endforeach()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE KPoolGpuSupport ${cuda_kernels})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${LLVM_RUNTIME_OUTPUT_INTDIR}
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "\$ORIGIN:\$ORIGIN/../lib"
    FOLDER "Tests")
endfunction()
