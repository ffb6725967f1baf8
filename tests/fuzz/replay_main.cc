// main() for a fuzz target in a build without libFuzzer: runs the target's
// LLVMFuzzerTestOneInput once on each input it is given, in order, the way
// libFuzzer replays a corpus. The suites run every target this way over its
// seeds and the bad-input corpus (tests/fuzz/CMakeLists.txt), so each build
// -- ASan + UBSan included -- checks the targets' contracts on those inputs;
// tools/fuzz.sh is the clang build that searches for new ones.
//
// Usage: TARGET PATH...  A path is a file or a directory, whose regular
// files are read (not recursively) in name order. The path of each input is
// printed before it runs, so that when a contract breaks (fuzz_check.h
// aborts) the last line names the input.
// Exit status: 0 when every input ran; 2 when a path cannot be read or the
// paths hold no input at all (a corpus that went missing must not pass).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The inputs under `path`, or false (with a message) when it cannot be read.
bool CollectInputs(const fs::path& path, std::vector<fs::path>& inputs) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    inputs.push_back(path);
    return true;
  }
  if (!fs::is_directory(path, error)) {
    std::fprintf(stderr, "%s: not a file or directory\n", path.c_str());
    return false;
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error)) files.push_back(it->path());
  }
  if (error) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), error.message().c_str());
    return false;
  }
  std::sort(files.begin(), files.end());
  inputs.insert(inputs.end(), files.begin(), files.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], inputs)) return 2;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s PATH... (files or directories holding at least one input)\n",
                 argv[0]);
    return 2;
  }
  for (const fs::path& input : inputs) {
    std::printf("%s\n", input.c_str());
    std::fflush(stdout);
    std::ifstream in(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "%s: cannot read\n", input.c_str());
      return 2;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu inputs replayed\n", inputs.size());
  return 0;
}
