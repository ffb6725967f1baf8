#include "memory/occupancy_tree.h"

#include "gtest/gtest.h"

namespace jitpipe::occupancy_tree_test {
namespace {

TEST(OccupancyTreeTest, EmptyTreeFitsAtZero) {
  OccupancyTree tree(5, 64);
  EXPECT_EQ(tree.BestFit(0, 4, 100), 0);
  EXPECT_EQ(AlignUp(100, 64), 128);
  EXPECT_EQ(AlignUp(128, 64), 128);
}

TEST(OccupancyTreeTest, AGapMustBeFreeThroughoutTheInterval) {
  // time:    0     1     2     3
  // [0,64)   a     a     .     .
  // [64,128) b     b     b     b
  OccupancyTree tree(4, 64);
  tree.Occupy(0, 1, 0, 64);
  tree.Occupy(0, 3, 64, 64);
  EXPECT_EQ(tree.BestFit(2, 3, 64), 0);    // a is gone by time 2
  EXPECT_EQ(tree.BestFit(1, 2, 64), 128);  // a still holds [0,64) at time 1
  EXPECT_EQ(tree.BestFit(3, 3, 65), 128);  // the free [0,64) is too small
}

TEST(OccupancyTreeTest, PrefersTheSmallestFittingGapThenTheLowest) {
  // At time 0: [0,64) used, [64,256) free, [256,320) used, [320,384) free,
  // [384,448) used, [448,512) free, [512,576) used.
  OccupancyTree tree(1, 64);
  for (int64_t lo : {0, 256, 384, 512}) tree.Occupy(0, 0, lo, 64);
  EXPECT_EQ(tree.BestFit(0, 0, 64), 320);   // exact fit, the lowest of two
  EXPECT_EQ(tree.BestFit(0, 0, 100), 64);   // only the big gap fits
  EXPECT_EQ(tree.BestFit(0, 0, 200), 576);  // none fits: above everything
}

TEST(OccupancyTreeTest, CountsIntervalsStoredHigherUpTheTree) {
  // A long interval lands in inner nodes; short queries inside it see it.
  OccupancyTree tree(16, 64);
  tree.Occupy(1, 14, 0, 128);
  for (int t = 1; t <= 14; ++t) EXPECT_EQ(tree.BestFit(t, t, 64), 128) << t;
  EXPECT_EQ(tree.BestFit(0, 0, 64), 0);
  EXPECT_EQ(tree.BestFit(15, 15, 64), 0);
  EXPECT_EQ(tree.BestFit(0, 15, 64), 128);
}

TEST(OccupancyTreeTest, ManyRangesInOneSetSurviveGrowthAndClear) {
  // 40 ranges at time 0, every other 64 bytes: one set grows from its
  // inline ranges through several spilled capacities. After Clear() the
  // set starts empty, and grows again in the blocks it kept.
  OccupancyTree tree(1, 64);
  for (int round = 0; round < 2; ++round) {
    for (int64_t k = 39; k >= 0; --k) tree.Occupy(0, 0, 128 * k, 64);  // in front each time
    EXPECT_EQ(tree.BestFit(0, 0, 64), 64) << round;          // the lowest exact fit
    EXPECT_EQ(tree.BestFit(0, 0, 65), 128 * 40 - 64) << round;  // above everything
    tree.Occupy(0, 0, 64, 64);  // joins the first two ranges into one
    EXPECT_EQ(tree.BestFit(0, 0, 64), 192) << round;
    tree.Clear();
    EXPECT_EQ(tree.BestFit(0, 0, 64), 0) << round;
  }
}

}  // namespace
}  // namespace jitpipe::occupancy_tree_test
