# Helpers shared by every folder's CMakeLists.txt.

# Warnings for project code only (never for dependencies).
set(JITPIPE_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2)
if(JITPIPE_WERROR)
  list(APPEND JITPIPE_WARNINGS -Werror)
endif()

# Every installed library, for the export set and the umbrella target.
set_property(GLOBAL PROPERTY JITPIPE_LIBRARIES "")

# jitpipe_add_library(NAME SOURCES ... DEPS ...)
# Builds static library jitpipe_<NAME> with alias jitpipe::<NAME>. Headers are
# included by their path from the repository root ("scheduler/ir/action.h"),
# which is also how they are installed.
function(jitpipe_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target jitpipe_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(jitpipe::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/jitpipe>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${JITPIPE_WARNINGS}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY JITPIPE_LIBRARIES ${target})
endfunction()

# jitpipe_add_executable(NAME SOURCES ... DEPS ...): project code with warnings.
function(jitpipe_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${JITPIPE_WARNINGS}>)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  if(TARGET jitpipe_tsan_annotations)  # JITPIPE_TSAN builds (JitpipeTsan.cmake)
    target_link_libraries(${name} PRIVATE jitpipe_tsan_annotations)
  endif()
endfunction()
