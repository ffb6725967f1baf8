# jitpipe_link_absl_statically(TARGET): links TARGET, an executable, with
# Abseil's static archives instead of its shared libraries where the
# distribution ships both (Debian's libabsl-dev does): a process that loaded
# ~40 libabsl_*.so spent milliseconds in the dynamic loader before main()
# (issue 19: `jitpipe --version` must take <= 5 ms).
#
# Only the executables named: Abseil's CMake package imports every library
# as SHARED, and a shared module cannot hold the archives (their
# thread-locals use the executable-only TLS model, R_X86_64_TPOFF32), so
# switching the imported targets for the whole build would break every
# module that links jitpipe's libraries. Instead the target's link command
# goes through cmake/link_static_absl.sh (CXX_LINKER_LAUNCHER), which puts
# each libabsl_*.so that has an archive beside it by that archive, in place:
# CMake has already ordered Abseil's libraries by their dependencies.
#
# Off (a no-op) with JITPIPE_STATIC_ABSL=OFF, for ThreadSanitizer builds
# (JitpipeTsan.cmake wraps absl::Mutex with ld --wrap, which must not reach
# into Abseil's own objects), and where no archive exists.
set(_jitpipe_absl_archive "")
if(TARGET absl::base)
  get_target_property(_jitpipe_absl_configs absl::base IMPORTED_CONFIGURATIONS)
  list(GET _jitpipe_absl_configs 0 _jitpipe_absl_config)
  get_target_property(_jitpipe_absl_so absl::base IMPORTED_LOCATION_${_jitpipe_absl_config})
  string(REGEX REPLACE "\\.so(\\.[0-9.]*)?$" ".a" _jitpipe_absl_archive "${_jitpipe_absl_so}")
endif()
if(JITPIPE_STATIC_ABSL AND EXISTS "${_jitpipe_absl_archive}")
  set(JITPIPE_ABSL_ARCHIVES ON)
else()
  set(JITPIPE_ABSL_ARCHIVES OFF)
endif()
message(STATUS "jitpipe: the CLI links Abseil's archives: ${JITPIPE_ABSL_ARCHIVES}")

function(jitpipe_link_absl_statically target)
  if(JITPIPE_ABSL_ARCHIVES)
    set_target_properties(${target} PROPERTIES
      CXX_LINKER_LAUNCHER "${PROJECT_SOURCE_DIR}/cmake/link_static_absl.sh")
  endif()
endfunction()
