#include "tests/testing/conformance.h"

#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe::testing {

std::vector<RankProgram> ProgramsFromJson(const nlohmann::json& ranks) {
  std::vector<RankProgram> programs;
  for (const auto& list : ranks) {
    RankProgram program;
    for (const auto& item : list) {
      if (item.is_null()) {
        program.push_back(Action::Bubble());
        continue;
      }
      absl::StatusOr<Action> a = ParseAction(item.get<std::string>());
      EXPECT_TRUE(a.ok()) << a.status();
      program.push_back(a.ok() ? *a : Action::Bubble());
    }
    programs.push_back(std::move(program));
  }
  return programs;
}

std::string CsvFromJson(const nlohmann::json& ranks) {
  std::string out;
  for (const auto& list : ranks) {
    bool first = true;
    for (const auto& item : list) {
      if (!first) out += ',';
      first = false;
      if (!item.is_null()) out += item.get<std::string>();
    }
    out += '\n';
  }
  return out;
}

std::vector<std::vector<std::string>> ProgramText(const std::vector<RankProgram>& ranks) {
  std::vector<std::vector<std::string>> out;
  for (const RankProgram& p : ranks) {
    std::vector<std::string> row;
    for (const Action& a : p) row.push_back(a.ToString());
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::vector<std::string>> JsonText(const nlohmann::json& ranks) {
  std::vector<std::vector<std::string>> out;
  for (const auto& list : ranks) {
    std::vector<std::string> row;
    for (const auto& item : list) row.push_back(item.is_null() ? "" : item.get<std::string>());
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::string> PytorchConformanceNames() {
  std::vector<std::string> names;
  for (std::string file : ListTestdata("conformance/pytorch", ".json")) {
    names.push_back(file.substr(0, file.size() - 5));
  }
  return names;
}

}  // namespace jitpipe::testing
