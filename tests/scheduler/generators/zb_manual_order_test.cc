// zb_manual_order.h against orders upstream's zb.py produced at non-unit
// costs (tests/testdata/zero_bubble/costed/README.md): every flag
// combination on its own, initial_solution's pick, and upstream's
// best_time to the last bit (the arithmetic follows upstream's).
#include "scheduler/generators/zb_manual_order.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "scheduler/analysis/validate_structure.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::zb_manual_order_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadTestdata;
using Text = std::vector<std::vector<std::string>>;

// One `# ... best_time T` section of a golden file: T and the stage lines.
struct Section {
  std::string header;
  double best_time = 0;
  Text stages;
};

std::vector<Section> ReadSections(const std::string& file) {
  std::vector<Section> out;
  for (absl::string_view line :
       absl::StrSplit(ReadTestdata("zero_bubble/costed/" + file), '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) {
      const size_t at = line.find("best_time ");
      if (at == absl::string_view::npos) continue;  // the inputs line
      Section s{.header = std::string(line), .best_time = 0, .stages = {}};
      EXPECT_TRUE(absl::SimpleAtod(line.substr(at + 10), &s.best_time)) << line;
      out.push_back(std::move(s));
      continue;
    }
    out.back().stages.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return out;
}

struct Case {
  std::string file;
  int pp, m;
  double f, b, w, comm;
  int64_t cap;
};

constexpr double kF = 1;
constexpr double kTypicalB = 1.1, kTypicalW = 0.7, kTypicalComm = 0.05;
constexpr double kHeavyB = 1.6, kHeavyW = 1.2, kHeavyComm = 0.1;

class ZbInitialSolutionTest : public ::testing::TestWithParam<Case> {};

TEST_P(ZbInitialSolutionTest, MatchesUpstream) {
  const Case& c = GetParam();
  const std::vector<Section> golden = ReadSections(c.file);
  ASSERT_EQ(golden.size(), 1u);
  ASSERT_OK_AND_ASSIGN(
      ZbOrder order,
      ZbInitialSolution(UniformZbGraph(c.pp, c.f, c.b, c.w, c.comm, c.cap), c.pp, c.m));
  EXPECT_EQ(ProgramText(order.stages), golden[0].stages);
  EXPECT_EQ(order.best_time, golden[0].best_time);
  EXPECT_EQ(order.skipped, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, ZbInitialSolutionTest,
    ::testing::Values(
        Case{"zb_typical_pp4_mb8_cap4.txt", 4, 8, kF, kTypicalB, kTypicalW, kTypicalComm, 4},
        Case{"zb_typical_pp4_mb8_cap6.txt", 4, 8, kF, kTypicalB, kTypicalW, kTypicalComm, 6},
        Case{"zb_typical_pp4_mb8_cap8.txt", 4, 8, kF, kTypicalB, kTypicalW, kTypicalComm, 8},
        Case{"zb_typical_pp8_mb16_cap12.txt", 8, 16, kF, kTypicalB, kTypicalW, kTypicalComm, 12},
        Case{"zb_heavy_pp4_mb8_cap6.txt", 4, 8, kF, kHeavyB, kHeavyW, kHeavyComm, 6},
        Case{"zb_heavy_pp4_mb16_cap4.txt", 4, 16, kF, kHeavyB, kHeavyW, kHeavyComm, 4},
        Case{"zb_heavy_pp8_mb16_cap16.txt", 8, 16, kF, kHeavyB, kHeavyW, kHeavyComm, 16},
        Case{"zb_balanced_pp8_mb32_cap8.txt", 8, 32, kF, 1, 1, 0, 8}));

// Each combination alone, in upstream's loop order (allow, prioritise,
// greedy; true before false).
class ZbManualOrderTest : public ::testing::TestWithParam<Case> {};

TEST_P(ZbManualOrderTest, EveryCombinationMatchesUpstream) {
  const Case& c = GetParam();
  const std::vector<Section> golden = ReadSections(c.file);
  ASSERT_EQ(golden.size(), 8u);
  const ZbGraph graph = UniformZbGraph(c.pp, c.f, c.b, c.w, c.comm, c.cap);
  int k = 0;
  for (bool allow : {true, false}) {
    for (bool prioritize : {true, false}) {
      for (bool greedy : {true, false}) {
        const ZbFlags flags{.allow_bubble_before_first_b = allow, .prioritize_b = prioritize,
                            .no_bubble_greedy = greedy};
        ASSERT_OK_AND_ASSIGN(ZbOrder order, ZbManualOrder(graph, c.pp, c.m, flags));
        EXPECT_EQ(ProgramText(order.stages), golden[k].stages) << golden[k].header;
        EXPECT_EQ(order.best_time, golden[k].best_time) << golden[k].header;
        ++k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, ZbManualOrderTest,
    ::testing::Values(
        Case{"zb_every_typical_pp4_mb8_cap6.txt", 4, 8, kF, kTypicalB, kTypicalW, kTypicalComm, 6},
        Case{"zb_every_heavy_pp4_mb12_cap5.txt", 4, 12, kF, kHeavyB, kHeavyW, kHeavyComm, 5}));

// Every action once, in dependency order per stage.
TEST(ZbManualOrderTest, OrdersAreValidSchedules) {
  ASSERT_OK_AND_ASSIGN(ZbOrder order,
                       ZbInitialSolution(UniformZbGraph(5, 1, 1.3, 0.4, 0.2, 7), 5, 11));
  Schedule s;
  s.name = "zb";
  s.pp = 5;
  s.stages_per_rank = 1;
  s.microbatches = 11;
  s.stage_to_rank = StageToRank(Placement::kLoop, 5, 1);
  s.ranks = order.stages;
  EXPECT_OK(ValidateStructure(s));
}

TEST(ZbManualOrderTest, Errors) {
  // A cap of 0 units: no combination can make room for a second F.
  absl::StatusOr<ZbOrder> none = ZbInitialSolution(UniformZbGraph(4, 1, 1, 1, 0, 0), 4, 8);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Message(none),
            "zero-bubble heuristic (F prioritised, W only where it fits, no bubble before the "
            "first B): stage 0 cannot fit its memory cap of 0");
  EXPECT_EQ(Message(ZbInitialSolution(UniformZbGraph(3, 1, 1, 1, 0, 3), 4, 8)),
            "zero-bubble heuristic: a cost table has 3 stages; pp is 4");
  ZbGraph short_memory = UniformZbGraph(4, 1, 1, 1, 0, 3);
  short_memory.max_mem.pop_back();
  EXPECT_EQ(Message(ZbManualOrder(short_memory, 4, 8, {})),
            "zero-bubble heuristic: a memory table has 3 stages; pp is 4");
  EXPECT_EQ(Message(ZbManualOrder(short_memory, 4, 0, {})),
            "zero-bubble heuristic: pp and microbatches must be >= 1, got 4, 0");
}

TEST(ZbManualOrderTest, FlagsName) {
  EXPECT_EQ(ZbFlagsName({.allow_bubble_before_first_b = true, .prioritize_b = true,
                         .no_bubble_greedy = true}),
            "B prioritised, W fills every bubble, a bubble allowed before the first B");
}

}  // namespace
}  // namespace jitpipe::zb_manual_order_test
