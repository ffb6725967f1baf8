// The fuzz targets' one way to report a broken contract: print what broke
// and abort, which libFuzzer records as a crash with the input that caused
// it. Used for properties the headers promise (a round trip, a pass output
// that must validate), never for inputs that are merely invalid.
#ifndef JITPIPE_TESTS_FUZZ_FUZZ_CHECK_H_
#define JITPIPE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace jitpipe::fuzz {

[[noreturn]] inline void Broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "contract broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

inline void Check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) Broken(what, detail);
}

// Internal means "this is a bug" (house rules): never acceptable.
inline void CheckNotInternal(const absl::Status& status, const char* where) {
  if (status.code() == absl::StatusCode::kInternal) Broken(where, status.ToString());
}

}  // namespace jitpipe::fuzz

#endif  // JITPIPE_TESTS_FUZZ_FUZZ_CHECK_H_
