// Test helper: a lowered schedule from one line of text IR per rank.
#ifndef JITPIPE_TESTS_MEMORY_LOWERED_TEXT_H_
#define JITPIPE_TESTS_MEMORY_LOWERED_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe::testing {

// `programs[r]` is rank r's program, actions separated by spaces. Fails the
// test on an unparsable action.
inline Schedule LoweredFromText(int pp, int stages_per_rank, Placement placement,
                                int microbatches, const std::vector<std::string>& programs) {
  Schedule s;
  s.pp = pp;
  s.stages_per_rank = stages_per_rank;
  s.microbatches = microbatches;
  s.placement = placement;
  s.stage_to_rank = StageToRank(placement, pp, stages_per_rank);
  s.lowered = true;
  for (const std::string& text : programs) {
    RankProgram program;
    for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      absl::StatusOr<Action> action = ParseAction(word);
      EXPECT_TRUE(action.ok()) << action.status();
      if (action.ok()) program.push_back(*action);
    }
    s.ranks.push_back(program);
  }
  return s;
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_MEMORY_LOWERED_TEXT_H_
