// Every built-in generator once, at pp 4 and 8 microbatches (two stages per
// rank where the schedule takes several), for the table-driven pass tests
// that must hold on every schedule.
#ifndef JITPIPE_TESTS_SCHEDULER_PASSES_GENERATOR_CASES_H_
#define JITPIPE_TESTS_SCHEDULER_PASSES_GENERATOR_CASES_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"

namespace jitpipe::testing {

struct GeneratorCase {
  std::string schedule;
  int stages_per_rank = 1;
  int pp = 4;
  int microbatches = 8;

  GenerateOptions Spec() const { return {schedule, pp, microbatches, stages_per_rank}; }
};

inline std::vector<GeneratorCase> EveryGenerator() {
  return {{"gpipe", 1},      {"1f1b", 1},  {"interleaved-1f1b", 2}, {"looped-bfs", 2},
          {"interleaved-zb", 2}, {"zbv", 2}, {"dualpipev", 2},      {"zb-h1", 1},
          {"zb-h2", 1},      {"v-half", 2}, {"v-min", 2},           {"dualpipe", 2}};
}

// "interleaved_1f1b_v2": a test-name suffix.
inline std::string GeneratorCaseName(const ::testing::TestParamInfo<GeneratorCase>& info) {
  std::string name = info.param.schedule;
  std::replace(name.begin(), name.end(), '-', '_');
  return absl::StrCat(name, "_v", info.param.stages_per_rank);
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_SCHEDULER_PASSES_GENERATOR_CASES_H_
