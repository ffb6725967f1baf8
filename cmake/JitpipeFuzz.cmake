# libFuzzer builds (-DJITPIPE_FUZZ=ON, clang only; the CMake preset "fuzz").
#
# Every project target is compiled with libFuzzer's coverage instrumentation
# and ASan + UBSan (-fsanitize=fuzzer-no-link,address,undefined) and linked
# with the sanitizer runtimes; only the targets in tests/fuzz/ link libFuzzer
# itself (-fsanitize=fuzzer), which supplies their main(). Debian's absl is
# built by gcc against the same libstdc++ and links unchanged.
# Included from the top-level CMakeLists.txt before any target is defined.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "JITPIPE_FUZZ needs clang: configure with "
                      "-DCMAKE_CXX_COMPILER=clang++-14 (or cmake --preset fuzz)")
endif()

set(JITPIPE_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
add_compile_options(-fsanitize=fuzzer-no-link ${JITPIPE_FUZZ_SANITIZERS}
                    -fno-omit-frame-pointer)
add_link_options(${JITPIPE_FUZZ_SANITIZERS})
