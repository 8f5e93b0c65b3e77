# kpool_project_libraries(<out-var> <target>...)
#
# The libraries of this project (non-imported library targets) that the
# given targets are or link, directly or transitively. Used to bundle them
# into libKPoolCAPI.so and to export them, so that a library someone adds
# later is picked up without an edit. The static component libraries of
# MLIR/LLVM (imported targets) are left out.
function(kpool_project_libraries out)
  set(result)
  set(worklist ${ARGN})
  while(worklist)
    list(POP_FRONT worklist lib)
    # $<LINK_ONLY:x> appears in static libraries' link interfaces.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
    if(NOT TARGET ${lib} OR lib IN_LIST result)
      continue()
    endif()
    get_target_property(imported ${lib} IMPORTED)
    get_target_property(type ${lib} TYPE)
    if(imported OR NOT type MATCHES "^(STATIC|SHARED|INTERFACE)_LIBRARY$")
      continue()
    endif()
    list(APPEND result ${lib})
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(deps ${lib} ${prop})
      if(deps)
        list(APPEND worklist ${deps})
      endif()
    endforeach()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# kpool_link_project_archives(<target> <root>...)
#
# Links into the shared library <target> the project's static libraries
# that the roots need (kpool_project_libraries), by file and as a group, and
# libMLIR.so and libLLVM.so for everything else. Not as targets: their link
# interface names MLIR's static component libraries, and one of those pulled
# in next to libMLIR.so would be a second copy of MLIR's registries in the
# process (dialects, passes, TypeIDs). Used by libKPoolCAPI.so and
# libKPoolPlugin.so.
function(kpool_link_project_archives target)
  kpool_project_libraries(libs ${ARGN})
  set(archives)
  foreach(lib ${libs})
    get_target_property(type ${lib} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND archives $<TARGET_FILE:${lib}>)
      add_dependencies(${target} ${lib})
    endif()
  endforeach()
  target_link_libraries(${target} PRIVATE
    "-Wl,--start-group" ${archives} "-Wl,--end-group"
    MLIR
    LLVM
  )
endfunction()
