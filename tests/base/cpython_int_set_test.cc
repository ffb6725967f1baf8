#include "base/cpython_int_set.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace jitpipe::cpython_int_set_test {
namespace {

// One step of a set's history: add (true) or remove (false) a key.
struct Step {
  bool add;
  int32_t key;
};

struct Case {
  std::string name;
  std::vector<Step> steps;
  std::vector<int32_t> python_order;  // list(s) in CPython 3.11 after the steps
};

class CPythonIntSetTest : public ::testing::TestWithParam<Case> {};

TEST_P(CPythonIntSetTest, IteratesAsCPython) {
  CPythonIntSet s;
  for (const Step& step : GetParam().steps) {
    if (step.add) {
      s.Add(step.key);
    } else {
      s.Remove(step.key);
    }
  }
  EXPECT_EQ(s.Elements(), GetParam().python_order);
  EXPECT_EQ(s.size(), static_cast<int>(GetParam().python_order.size()));
  for (int32_t key : GetParam().python_order) EXPECT_TRUE(s.Contains(key));
}

// Each expected order was printed by CPython 3.11 for the same steps.
INSTANTIATE_TEST_SUITE_P(
    Python, CPythonIntSetTest,
    ::testing::Values(
        Case{"SmallKeysAscend", {{true, 3}, {true, 0}, {true, 2}}, {0, 2, 3}},
        // 10 lands in slot 2 of 8, 5 in slot 5.
        Case{"CollidingSlotOrder", {{true, 5}, {true, 10}}, {10, 5}},
        // 9 collides with 1 and probes on to slot 6; 17 then takes the dummy
        // 1 left behind.
        Case{"ReusesADummy", {{true, 1}, {true, 9}, {false, 1}, {true, 17}}, {17, 9}},
        // Of two dummies on 39's probe path (slots 7 and 5), the last is reused.
        Case{"ReusesTheLastDummyOnThePath",
             {{true, 5}, {true, 22}, {true, 29}, {true, 14}, {false, 14}, {false, 5},
              {true, 39}},
             {29, 39, 22}},
        // The fifth key fills 5 of 8 slots: the table grows to 32 slots and
        // the keys are reinserted in old slot order (33 before 1, which then
        // probes on to slot 2).
        Case{"Grows",
             {{true, 9}, {true, 1}, {true, 17}, {true, 25}, {true, 33}},
             {33, 1, 9, 17, 25}},
        Case{"RemovingAnAbsentKeyDoesNothing", {{true, 4}, {false, 12}}, {4}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

}  // namespace
}  // namespace jitpipe::cpython_int_set_test
