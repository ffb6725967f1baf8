#include "tests/testing/unit_cost_replay.h"

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::testing {
namespace {

// 1F1B pp4 m8 from PyTorch's runtime order: the anchors say makespan 33,
// spans 33..24, peak 4, 3, 2, 1.
TEST(UnitCostReplayTest, Reproduces1F1BAnchor) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/1F1B_pp4_mb8_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_runtime_equivalent"])));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 33);
  EXPECT_EQ(r.span, (std::vector<double>{33, 30, 27, 24}));
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(r.busy, (std::vector<double>{24, 24, 24, 24}));
}

TEST(UnitCostReplayTest, ReportsADependencyCycle) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0F1,0B1,0B0\n1F1,1B1,1F0,1B0\n"));
  // Rank 0 waits for 1B1... which is ready; this order is fine. Make a cycle:
  ASSERT_OK_AND_ASSIGN(Schedule bad, ParseScheduleCsv("0B0,0F0\n1F0,1B0\n"));
  EXPECT_OK(ReplayUnitCosts(s));
  EXPECT_FALSE(ReplayUnitCosts(bad).ok());
}

}  // namespace
}  // namespace jitpipe::testing
