// Access to tests/testdata and to the built CLI from tests.
#ifndef JITPIPE_TESTS_TESTING_TESTDATA_H_
#define JITPIPE_TESTS_TESTING_TESTDATA_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace jitpipe::testing {

// Absolute path of tests/testdata/<relative>.
std::string TestdataPath(const std::string& relative);
// Contents of tests/testdata/<relative>; fails the test (and returns "") if unreadable.
std::string ReadTestdata(const std::string& relative);
nlohmann::json ReadTestdataJson(const std::string& relative);
// Sorted file names (not paths) in tests/testdata/<dir> ending in `suffix`.
std::vector<std::string> ListTestdata(const std::string& dir, const std::string& suffix);

// A fresh directory under the test's temporary directory.
std::string MakeTempDir(const std::string& name);
void WriteTextFile(const std::string& path, const std::string& contents);
// The file's contents; "" when it is missing or unreadable (tests that
// expect a file say so by checking for "").
std::string ReadTextFile(const std::string& path);

struct CliResult {
  int exit_code = -1;  // 128 + signal when killed by a signal; -2 on timeout
  std::string out;
  std::string err;
};
// Runs the built jitpipe binary with `args`, killing it after
// `timeout_seconds` (exit_code -2 then).
CliResult RunCli(const std::vector<std::string>& args, int timeout_seconds = 120);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_TESTDATA_H_
