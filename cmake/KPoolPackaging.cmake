# Installation and the CMake package (find_package(KPool CONFIG)).
#
# Included at the end of the top-level CMakeLists.txt, after every target
# exists. It only adds install rules, export sets and the umbrella INTERFACE
# targets KPool::Dialect/Passes/Runtime; no existing target is built
# differently.
#
#   <prefix>/bin/kpool-opt
#   <prefix>/include/kpool/...      headers, .td files, generated .inc files
#   <prefix>/include/kpool-c/...    C API headers (+ generated pass .inc)
#   <prefix>/lib/lib*.a             the kpool static libraries
#   <prefix>/lib/libKPoolCAPI.so    the C API (RUNPATH $ORIGIN + LLVM's lib)
#   <prefix>/lib/cmake/kpool/       KPoolConfig.cmake, version, targets
#   <prefix>/python/kpool/          the Python package (ctypes)
#   <prefix>/share/doc/kpool/       README.md, CHANGELOG.md, docs/*.md (docs/dialect: the
#                                   generated reference), examples/: the
#                                   source tree's layout, so links resolve

include(CMakePackageConfigHelpers)

set(KPOOL_INSTALL_INCLUDE_DIR include)
set(KPOOL_INSTALL_LIB_DIR lib)
set(KPOOL_INSTALL_CMAKE_DIR lib/cmake/kpool)
set(KPOOL_INSTALL_PYTHON_DIR python)
set(KPOOL_INSTALL_DOC_DIR share/doc/kpool)

#===------------------------------------------------------------------------===#
# Libraries
#===------------------------------------------------------------------------===#

# The libraries to export: every add_mlir_library of this project, the C API,
# and whatever project library they link (e.g. plain add_library ones such as
# KPoolRuntimeCore), found by walking their link dependencies so that a
# library added later is exported without an edit here.
include(${CMAKE_CURRENT_LIST_DIR}/KPoolLibraries.cmake)
get_property(_kpool_roots GLOBAL PROPERTY MLIR_ALL_LIBS)
kpool_project_libraries(_kpool_export_libs ${_kpool_roots} KPoolCAPI
  KPoolRuntime KPoolJit)

# Debian's libMLIR.so and libLLVM.so hold every MLIR and LLVM library the
# kpool libraries link. In the build their link interface names MLIR's static
# component libraries (as add_mlir_library does); an installed copy names
# only the two shared libraries and its kpool siblings instead, so that a
# consumer never links a static copy of part of MLIR next to libMLIR.so
# (CMake would place e.g. libMLIRExecutionEngine.a, which itself depends on
# libMLIR.so, before it). Only the install interface changes: the build links
# exactly as before.
foreach(_kpool_lib IN LISTS _kpool_export_libs)
  # Consumers find the installed headers; the build uses the source tree.
  target_include_directories(${_kpool_lib} INTERFACE
    $<INSTALL_INTERFACE:${KPOOL_INSTALL_INCLUDE_DIR}>)
  get_target_property(_kpool_type ${_kpool_lib} TYPE)
  if(NOT _kpool_type STREQUAL "STATIC_LIBRARY")
    continue()
  endif()
  get_target_property(_kpool_deps ${_kpool_lib} INTERFACE_LINK_LIBRARIES)
  set(_kpool_new_deps)
  # Only a library that links MLIR or LLVM libraries says so in its install
  # interface: KPoolRuntimeCore links neither (an AOT consumer must not get
  # libMLIR.so or libLLVM.so), only the system's (libdl).
  set(_kpool_uses_mlir FALSE)
  foreach(_kpool_dep IN LISTS _kpool_deps)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _kpool_name
      "${_kpool_dep}")
    if(_kpool_name IN_LIST _kpool_export_libs)
      list(APPEND _kpool_new_deps "${_kpool_dep}")
    elseif(TARGET ${_kpool_name} OR _kpool_name MATCHES "^(MLIR|LLVM)")
      list(APPEND _kpool_new_deps "$<BUILD_INTERFACE:${_kpool_dep}>")
      set(_kpool_uses_mlir TRUE)
    elseif(_kpool_dep)
      list(APPEND _kpool_new_deps "${_kpool_dep}")
    endif()
  endforeach()
  if(_kpool_uses_mlir)
    list(APPEND _kpool_new_deps "$<INSTALL_INTERFACE:MLIR>"
      "$<INSTALL_INTERFACE:LLVM>")
  endif()
  set_property(TARGET ${_kpool_lib} PROPERTY
    INTERFACE_LINK_LIBRARIES "${_kpool_new_deps}")
endforeach()

# The umbrella targets of the package.
add_library(kpool_dialect INTERFACE)
target_link_libraries(kpool_dialect INTERFACE
  MLIRKPool MLIRKPoolUtils MLIRKPoolTransforms MLIR LLVM)
add_library(kpool_passes INTERFACE)
target_link_libraries(kpool_passes INTERFACE kpool_dialect
  KPoolRegistration KPoolPipelines MLIRKPoolToLinalg MLIRKPoolToGPU MLIR LLVM)
add_library(kpool_runtime INTERFACE)
target_link_libraries(kpool_runtime INTERFACE kpool_passes KPoolRuntimeJit
  MLIR LLVM)
foreach(_kpool_umbrella dialect passes runtime)
  target_include_directories(kpool_${_kpool_umbrella} INTERFACE
    $<INSTALL_INTERFACE:${KPOOL_INSTALL_INCLUDE_DIR}>)
  target_compile_features(kpool_${_kpool_umbrella} INTERFACE cxx_std_17)
endforeach()
set_target_properties(kpool_dialect PROPERTIES EXPORT_NAME Dialect)
set_target_properties(kpool_passes PROPERTIES EXPORT_NAME Passes)
set_target_properties(kpool_runtime PROPERTIES EXPORT_NAME Runtime)

# add_mlir_library already installs each library (into MLIR's own export
# set, which this project never installs); installing them again here puts
# them into KPoolTargets.
install(TARGETS ${_kpool_export_libs} kpool_dialect kpool_passes kpool_runtime
  EXPORT KPoolTargets
  ARCHIVE DESTINATION ${KPOOL_INSTALL_LIB_DIR}
  LIBRARY DESTINATION ${KPOOL_INSTALL_LIB_DIR}
  RUNTIME DESTINATION bin)
if(TARGET kpool-opt)
  install(TARGETS kpool-opt EXPORT KPoolTargets RUNTIME DESTINATION bin)
endif()
# Ahead-of-time kernels: kpool-aot, the CUDA runtime wrappers its GPU
# objects call, and kpool_add_aot_kernels (KPoolAOT.cmake, included by the
# package config).
# The installed tools find Debian's libMLIR.so/libLLVM.so through RPATH.
foreach(_kpool_tool kpool-opt kpool-aot)
  if(TARGET ${_kpool_tool})
    set_target_properties(${_kpool_tool} PROPERTIES
      INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
  endif()
endforeach()
if(TARGET kpool-aot)
  install(TARGETS kpool-aot EXPORT KPoolTargets RUNTIME DESTINATION bin)
endif()
if(TARGET kpool_cuda_runtime)
  install(TARGETS kpool_cuda_runtime EXPORT KPoolTargets
    LIBRARY DESTINATION ${KPOOL_INSTALL_LIB_DIR})
endif()
install(FILES ${KPOOL_SOURCE_DIR}/cmake/KPoolAOT.cmake
  DESTINATION ${KPOOL_INSTALL_CMAKE_DIR})
install(EXPORT KPoolTargets
  NAMESPACE KPool::
  DESTINATION ${KPOOL_INSTALL_CMAKE_DIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/KPoolConfig.cmake.in
  ${KPOOL_BINARY_DIR}/lib/cmake/kpool/KPoolConfig.cmake
  INSTALL_DESTINATION ${KPOOL_INSTALL_CMAKE_DIR}
  PATH_VARS KPOOL_INSTALL_INCLUDE_DIR KPOOL_INSTALL_PYTHON_DIR)
write_basic_package_version_file(
  ${KPOOL_BINARY_DIR}/lib/cmake/kpool/KPoolConfigVersion.cmake
  VERSION ${KPOOL_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${KPOOL_BINARY_DIR}/lib/cmake/kpool/KPoolConfig.cmake
  ${KPOOL_BINARY_DIR}/lib/cmake/kpool/KPoolConfigVersion.cmake
  DESTINATION ${KPOOL_INSTALL_CMAKE_DIR})

#===------------------------------------------------------------------------===#
# Headers
#===------------------------------------------------------------------------===#

install(DIRECTORY
  ${KPOOL_SOURCE_DIR}/include/kpool
  ${KPOOL_SOURCE_DIR}/include/kpool-c
  DESTINATION ${KPOOL_INSTALL_INCLUDE_DIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "*.td")
install(DIRECTORY
  ${KPOOL_BINARY_DIR}/include/kpool
  ${KPOOL_BINARY_DIR}/include/kpool-c
  DESTINATION ${KPOOL_INSTALL_INCLUDE_DIR}
  FILES_MATCHING PATTERN "*.inc"
  PATTERN "CMakeFiles" EXCLUDE)
install(FILES ${KPOOL_BINARY_DIR}/include/kpool/Version.h
  DESTINATION ${KPOOL_INSTALL_INCLUDE_DIR}/kpool)

#===------------------------------------------------------------------------===#
# Documentation
#===------------------------------------------------------------------------===#

# The dialect and pass reference generated by add_mlir_doc; built by default
# so that an install has it.
add_custom_target(kpool-generated-docs ALL)
add_dependencies(kpool-generated-docs mlir-doc)
# The documentation keeps the source tree's layout (README.md, docs/,
# examples/), so that every relative link in it resolves in an install too
# (test/Docs/links.test checks both); docs/semantics.md is the contract.
install(DIRECTORY ${KPOOL_BINARY_DIR}/docs/KPool/
  DESTINATION ${KPOOL_INSTALL_DOC_DIR}/docs/dialect
  FILES_MATCHING PATTERN "*.md")
# The hand-written guides (docs/dialect holds committed copies of the
# generated reference, installed above from the build).
install(DIRECTORY ${KPOOL_SOURCE_DIR}/docs/
  DESTINATION ${KPOOL_INSTALL_DOC_DIR}/docs
  FILES_MATCHING PATTERN "*.md"
  PATTERN "dialect" EXCLUDE)
install(FILES ${KPOOL_SOURCE_DIR}/README.md ${KPOOL_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${KPOOL_INSTALL_DOC_DIR})
install(DIRECTORY ${KPOOL_SOURCE_DIR}/examples
  DESTINATION ${KPOOL_INSTALL_DOC_DIR}
  PATTERN "__pycache__" EXCLUDE)

#===------------------------------------------------------------------------===#
# Python
#===------------------------------------------------------------------------===#

# <prefix>/python/kpool finds <prefix>/lib/libKPoolCAPI.so by itself.
install(DIRECTORY ${KPOOL_SOURCE_DIR}/python/kpool
  DESTINATION ${KPOOL_INSTALL_PYTHON_DIR}
  FILES_MATCHING PATTERN "*.py"
  PATTERN "__pycache__" EXCLUDE)
