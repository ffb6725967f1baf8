// Runs every case of the bad-input corpus (tests/corpus/cases.json) through
// the jitpipe binary: the expected exit status, the expected message
// fragments, a message that names the file and is clean UTF-8 text whatever
// bytes the input held, never a signal, never a hang.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/testdata.h"

namespace jitpipe::corpus_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kTimeoutSeconds = 60;
constexpr int kMinimumCases = 40;
constexpr size_t kMaxLineBytes = 1024;

const std::string& CorpusDir() {
  static const std::string* dir = new std::string(JITPIPE_CORPUS);
  return *dir;
}
std::string InputsDir() { return CorpusDir() + "/inputs"; }

struct CorpusCase {
  std::string name;
  std::vector<std::string> args;  // with {corpus} and {tmp} unexpanded
  int exit = 0;
  std::vector<std::string> expect;
};

void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.name; }

// Read at test registration; a missing or malformed manifest yields no
// cases, which CorpusManifestTest reports.
std::vector<CorpusCase> LoadCases() {
  std::ifstream in(CorpusDir() + "/cases.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  std::vector<CorpusCase> cases;
  if (doc.is_discarded() || !doc.contains("cases")) return cases;
  for (const nlohmann::json& c : doc["cases"]) {
    cases.push_back({c.value("name", ""), c.value("args", std::vector<std::string>{}),
                     c.value("exit", -1), c.value("expect", std::vector<std::string>{})});
  }
  return cases;
}

const std::vector<CorpusCase>& AllCases() {
  static const std::vector<CorpusCase>* cases = new std::vector<CorpusCase>(LoadCases());
  return *cases;
}

// The corpus files a case's arguments name (by file name).
std::vector<std::string> NamedFiles(const CorpusCase& c) {
  std::vector<std::string> files;
  for (const std::string& arg : c.args) {
    if (arg.rfind("{corpus}/", 0) == 0) files.push_back(arg.substr(9));
  }
  return files;
}

TEST(CorpusManifestTest, HasEnoughWellFormedUniqueCases) {
  ASSERT_GE(AllCases().size(), static_cast<size_t>(kMinimumCases));
  std::set<std::string> names;
  for (const CorpusCase& c : AllCases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    EXPECT_THAT(c.exit, ::testing::AnyOf(1, 2)) << c.name;
    EXPECT_FALSE(c.args.empty()) << c.name;
    EXPECT_FALSE(c.expect.empty()) << c.name;
  }
}

// Every file in inputs/ is used by a case, so none rots unnoticed.
TEST(CorpusManifestTest, EveryInputFileIsUsed) {
  std::set<std::string> used;
  for (const CorpusCase& c : AllCases()) {
    for (const std::string& file : NamedFiles(c)) used.insert(file);
  }
  for (const auto& entry : std::filesystem::directory_iterator(InputsDir())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(used.count(name) > 0) << "tests/corpus/inputs/" << name << " is in no case";
  }
}

// Whether `text` is valid UTF-8 without control characters other than
// newline and tab: a message that reaches a terminal intact.
bool IsCleanText(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
      ++i;
      continue;
    }
    const int length = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

class CorpusTest : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CorpusTest, RefusedCleanly) {
  const CorpusCase& c = GetParam();
  const std::string tmp = MakeTempDir("corpus");
  std::vector<std::string> args;
  for (const std::string& arg : c.args) {
    args.push_back(absl::StrReplaceAll(arg, {{"{corpus}", InputsDir()}, {"{tmp}", tmp}}));
  }
  const CliResult r = RunCli(args, kTimeoutSeconds);
  ASSERT_NE(r.exit_code, -2) << "hung for " << kTimeoutSeconds << " s";
  ASSERT_LT(r.exit_code, 128) << "killed by signal " << r.exit_code - 128 << "\n" << r.err;
  EXPECT_EQ(r.exit_code, c.exit) << r.err;
  EXPECT_THAT(r.err, StartsWith("jitpipe"));
  EXPECT_TRUE(IsCleanText(r.err)) << "stderr is not clean UTF-8 text: " << r.err;
  // Long input is abbreviated, never echoed (a 3 MB action made a 6 MB line).
  for (absl::string_view line : absl::StrSplit(r.err, '\n')) {
    EXPECT_LT(line.size(), kMaxLineBytes) << line.substr(0, 400);
  }
  for (const std::string& fragment : c.expect) EXPECT_THAT(r.err, HasSubstr(fragment));
  std::vector<std::string> files = NamedFiles(c);
  for (const std::string& arg : c.args) {
    if (arg.rfind("/dev/", 0) == 0) files.push_back(arg);  // a device as input
  }
  if (c.exit == 1 && !files.empty()) {
    const std::string first_line = r.err.substr(0, r.err.find('\n'));
    bool named = false;
    for (const std::string& file : files) named = named || first_line.find(file) != std::string::npos;
    EXPECT_TRUE(named) << "the message names none of the case's files: " << first_line;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CorpusTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<CorpusCase>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace jitpipe::corpus_test
