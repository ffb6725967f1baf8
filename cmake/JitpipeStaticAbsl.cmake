# Links Abseil's static archives instead of its shared libraries where the
# distribution ships both (Debian's libabsl-dev does): a process that loaded
# ~40 libabsl_*.so spent milliseconds in the dynamic loader before main()
# (issue 19: `jitpipe --version` must take <= 5 ms).
#
# Abseil's CMake package (abslTargets-*.cmake) imports every library as
# SHARED with the .so as its location; for each one whose .a lies beside it,
# the location is pointed at the archive (CMake then passes the archive's
# full path to the linker, which links it statically; the targets' link
# interfaces keep the archives in dependency order). Only this build is
# affected: an installed jitpipe's consumers find Abseil themselves.
#
# A shared module cannot hold these archives (their thread-locals use the
# executable-only TLS model: R_X86_64_TPOFF32), so the shared libraries
# stay listed in JITPIPE_ABSL_SHARED_LIBRARIES for modules to link first
# (comm/CMakeLists.txt): their symbols then resolve there and no archive
# member is pulled in.
#
# Off for ThreadSanitizer builds (JitpipeTsan.cmake wraps absl::Mutex with
# ld --wrap, which must not reach into Abseil's own objects).
function(jitpipe_use_static_absl)
  get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY IMPORTED_TARGETS)
  set(switched 0)
  set(shared "")
  foreach(target IN LISTS targets)
    if(NOT target MATCHES "^absl::")
      continue()
    endif()
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "SHARED_LIBRARY")
      continue()
    endif()
    get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
    foreach(config IN LISTS configs)
      get_target_property(location ${target} IMPORTED_LOCATION_${config})
      string(REGEX REPLACE "\\.so(\\.[0-9.]*)?$" ".a" archive "${location}")
      if(archive STREQUAL location OR NOT EXISTS "${archive}")
        continue()
      endif()
      list(APPEND shared "${location}")
      set_target_properties(${target} PROPERTIES
        IMPORTED_LOCATION_${config} "${archive}"
        IMPORTED_SONAME_${config} "")
      math(EXPR switched "${switched} + 1")
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES shared)
  set(JITPIPE_ABSL_SHARED_LIBRARIES "${shared}" PARENT_SCOPE)
  message(STATUS "jitpipe: ${switched} Abseil libraries linked statically")
endfunction()

jitpipe_use_static_absl()
