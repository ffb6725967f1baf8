// The zero-bubble family as the registry (generate.h) serves it.
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "scheduler/generators/dual_pipe.h"
#include "scheduler/generators/generate.h"
#include "scheduler/generators/generator_families.h"
#include "scheduler/generators/v_half_min.h"
#include "scheduler/generators/zero_bubble_h.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::zero_bubble_family_test {
namespace {

struct Entry {
  std::string lookup;  // a name or alias, in any case
  std::string name;
  int default_stages_per_rank;
};

class ZeroBubbleFamilyLookupTest : public ::testing::TestWithParam<Entry> {};

TEST_P(ZeroBubbleFamilyLookupTest, FindsTheCanonicalEntry) {
  const Entry& e = GetParam();
  ASSERT_OK_AND_ASSIGN(const GeneratorInfo* g, FindGenerator(e.lookup));
  EXPECT_EQ(g->name, e.name);
  EXPECT_EQ(g->default_stages_per_rank, e.default_stages_per_rank);
  EXPECT_FALSE(g->summary.empty());
}

INSTANTIATE_TEST_SUITE_P(NamesAndAliases, ZeroBubbleFamilyLookupTest,
                         ::testing::Values(Entry{"zb-h1", "zb-h1", 1}, Entry{"ZBH1", "zb-h1", 1},
                                           Entry{"ZB-1P", "zb-h1", 1}, Entry{"ZB-H2", "zb-h2", 1},
                                           Entry{"zbh2", "zb-h2", 1}, Entry{"zb-2p", "zb-h2", 1},
                                           Entry{"v-half", "v-half", 2},
                                           Entry{"VHalf", "v-half", 2}, Entry{"V-MIN", "v-min", 2},
                                           Entry{"vmin", "v-min", 2},
                                           Entry{"dualpipe", "dualpipe", 2},
                                           Entry{"DualPipe", "dualpipe", 2}));

// PyTorch's interleaved zero-bubble class keeps its own name.
TEST(ZeroBubbleFamilyTest, InterleavedZeroBubbleIsNotOurs) {
  ASSERT_OK_AND_ASSIGN(const GeneratorInfo* g, FindGenerator("InterleavedZeroBubble"));
  EXPECT_EQ(g->name, "interleaved-zb");
}

// No name or alias of the whole registry means two schedules.
TEST(ZeroBubbleFamilyTest, NamesAndAliasesAreUniqueAcrossTheRegistry) {
  std::set<std::string> seen;
  for (const GeneratorInfo& g : AllGenerators()) {
    EXPECT_TRUE(seen.insert(absl::AsciiStrToLower(g.name)).second) << g.name;
    for (const std::string& alias : g.aliases) {
      if (absl::AsciiStrToLower(alias) == absl::AsciiStrToLower(g.name)) continue;
      EXPECT_TRUE(seen.insert(absl::AsciiStrToLower(alias)).second) << alias;
    }
  }
}

TEST(ZeroBubbleFamilyTest, ListsTheFiveInOrder) {
  std::vector<std::string> names;
  for (const GeneratorInfo& g : ZeroBubbleFamily()) names.push_back(g.name);
  EXPECT_EQ(names, (std::vector<std::string>{"zb-h1", "zb-h2", "v-half", "v-min", "dualpipe"}));
}

// Generate() passes the default stages per rank and reaches the generators.
TEST(ZeroBubbleFamilyTest, GenerateUsesTheDefaults) {
  ASSERT_OK_AND_ASSIGN(Schedule h1, Generate({"ZBH1", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule direct_h1, GenerateZeroBubbleH1(4, 8, 1));
  EXPECT_EQ(h1, direct_h1);
  ASSERT_OK_AND_ASSIGN(Schedule h2, Generate({"zb-h2", 3, 5, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule direct_h2, GenerateZeroBubbleH2(3, 5, 1));
  EXPECT_EQ(h2, direct_h2);
  ASSERT_OK_AND_ASSIGN(Schedule half, Generate({"v-half", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule direct_half, GenerateVHalf(4, 8, 2));
  EXPECT_EQ(half, direct_half);
  ASSERT_OK_AND_ASSIGN(Schedule min, Generate({"v-min", 4, 8, 2}));
  ASSERT_OK_AND_ASSIGN(Schedule direct_min, GenerateVMin(4, 8, 2));
  EXPECT_EQ(min, direct_min);
  ASSERT_OK_AND_ASSIGN(Schedule dual, Generate({"dualpipe", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule direct_dual, GenerateDualPipe(4, 8, 2));
  EXPECT_EQ(dual, direct_dual);
}

TEST(ZeroBubbleFamilyTest, GenerateRefusesWhatTheGeneratorRefuses) {
  absl::StatusOr<Schedule> s = Generate({"dualpipe", 4, 6, 0});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(s),
            "dualpipe: microbatches must be at least 2 * pp = 8, got 6; use 8 or more");
}

}  // namespace
}  // namespace jitpipe::zero_bubble_family_test
