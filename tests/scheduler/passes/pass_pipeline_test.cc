#include "scheduler/passes/pass_pipeline.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::pass_pipeline_test {
namespace {

using ::jitpipe::testing::Message;

// A pass that appends `tag` to the schedule's name, so the order shows.
PassFunction Tag(std::string tag) {
  return [tag](const Schedule& in) -> absl::StatusOr<Schedule> {
    Schedule out = in;
    out.name += tag;
    return out;
  };
}

PassPipeline TwoPasses() {
  PassPipeline pipeline("test");
  pipeline.AddPass("a", Tag("a")).AddPass("b", Tag("b"));
  return pipeline;
}

TEST(PassPipelineTest, RunsThePassesInOrderAndLeavesTheInputAlone) {
  Schedule input;
  input.name = "in:";
  ASSERT_OK_AND_ASSIGN(PipelineResult result, TwoPasses().Run(input));
  EXPECT_EQ(result.schedule.name, "in:ab");
  EXPECT_EQ(input.name, "in:");
  EXPECT_FALSE(result.dumped.has_value());
  EXPECT_EQ(TwoPasses().PassNames(), (std::vector<std::string>{"a", "b"}));
}

TEST(PassPipelineTest, WithoutPassesReturnsTheInput) {
  Schedule input;
  input.name = "x";
  ASSERT_OK_AND_ASSIGN(PipelineResult result, PassPipeline("empty").Run(input));
  EXPECT_EQ(result.schedule, input);
}

TEST(PassPipelineTest, RecordsTheProgramAfterTheNamedPass) {
  ASSERT_OK_AND_ASSIGN(PipelineResult result, TwoPasses().Run(Schedule{}, {.dump_after = "a"}));
  ASSERT_TRUE(result.dumped.has_value());
  EXPECT_EQ(result.dumped->name, "a");
  EXPECT_EQ(result.schedule.name, "ab");
}

// An in-place pass reuses the storage of the program it is given: the
// pipeline moves its own intermediate in, and copies the caller's input.
TEST(PassPipelineTest, InPlacePassesGetIntermediatesMovedAndTheInputCopied) {
  const Action* produced = nullptr;  // the buffer the first pass returned
  const Action* consumed = nullptr;  // the buffer the in-place pass was given
  PassPipeline pipeline("test");
  pipeline
      .AddPass("grow",
               [&](const Schedule& in) -> absl::StatusOr<Schedule> {
                 Schedule out = in;
                 out.ranks.assign(1, RankProgram(8, Action::Make(ActionKind::kForward, 0, 0)));
                 produced = out.ranks[0].data();
                 return out;
               })
      .AddInPlacePass("tag", [&](Schedule in) -> absl::StatusOr<Schedule> {
        consumed = in.ranks.empty() ? nullptr : in.ranks[0].data();
        in.name += "!";
        return in;
      });
  Schedule input;
  input.name = "in";
  ASSERT_OK_AND_ASSIGN(PipelineResult result, pipeline.Run(input, {.dump_after = "grow"}));
  EXPECT_EQ(consumed, produced);
  EXPECT_EQ(result.schedule.name, "in!");
  ASSERT_TRUE(result.dumped.has_value());
  EXPECT_EQ(result.dumped->name, "in");  // recorded before the next pass took it

  PassPipeline first("test");
  first.AddInPlacePass("tag", [](Schedule in) -> absl::StatusOr<Schedule> {
    in.name += "!";
    return in;
  });
  ASSERT_OK_AND_ASSIGN(PipelineResult alone, first.Run(input));
  EXPECT_EQ(alone.schedule.name, "in!");
  EXPECT_EQ(input.name, "in");
}

// Given the input, the pipeline releases it once the first pass has read it
// (the second pass already runs without it), and an in-place first pass
// takes its storage rather than a copy.
TEST(PassPipelineTest, AnOwnedInputIsReleasedOnceTheFirstPassHasReadIt) {
  Schedule input;
  input.name = "in:";
  input.ranks.assign(2, RankProgram(8, Action::Make(ActionKind::kForward, 0, 0)));
  const Schedule* watched = &input;
  size_t ranks_seen_by_second = 99;
  PassPipeline pipeline("test");
  pipeline.AddPass("a", Tag("a")).AddPass("b", [&](const Schedule& in) -> absl::StatusOr<Schedule> {
    ranks_seen_by_second = watched->ranks.size();
    return in;
  });
  ASSERT_OK_AND_ASSIGN(PipelineResult result, pipeline.Run(std::move(input)));
  EXPECT_EQ(result.schedule.name, "in:a");
  EXPECT_EQ(result.schedule.ranks.size(), 2u);
  EXPECT_EQ(ranks_seen_by_second, 0u);

  Schedule owned;
  owned.name = "in";
  owned.ranks.assign(1, RankProgram(8, Action::Make(ActionKind::kForward, 0, 0)));
  const Action* storage = owned.ranks[0].data();
  const Action* consumed = nullptr;
  PassPipeline in_place("test");
  in_place.AddInPlacePass("tag", [&](Schedule in) -> absl::StatusOr<Schedule> {
    consumed = in.ranks[0].data();
    in.name += "!";
    return in;
  });
  ASSERT_OK_AND_ASSIGN(PipelineResult moved, in_place.Run(std::move(owned)));
  EXPECT_EQ(consumed, storage);
  EXPECT_EQ(moved.schedule.name, "in!");

  Schedule alone;
  alone.name = "x";
  ASSERT_OK_AND_ASSIGN(PipelineResult empty, PassPipeline("empty").Run(std::move(alone)));
  EXPECT_EQ(empty.schedule.name, "x");
}

TEST(PassPipelineTest, RefusesToDumpAnUnknownPass) {
  absl::StatusOr<PipelineResult> result = TwoPasses().Run(Schedule{}, {.dump_after = "c"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(result), "no pass named \"c\" in the test pipeline; its passes are: a, b");
}

TEST(PassPipelineTest, AFailingPassIsNamedAndKeepsItsCodeAndPayload) {
  PassPipeline pipeline("test");
  pipeline.AddPass("a", Tag("a")).AddPass("b", [](const Schedule&) -> absl::StatusOr<Schedule> {
    absl::Status status = absl::FailedPreconditionError("not lowered");
    status.SetPayload("grid", absl::Cord("the grid"));
    return status;
  });
  bool c_ran = false;
  pipeline.AddPass("c", [&](const Schedule& s) -> absl::StatusOr<Schedule> {
    c_ran = true;
    return s;
  });
  absl::StatusOr<PipelineResult> result = pipeline.Run(Schedule{});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(result), "pass b: not lowered");
  EXPECT_EQ(result.status().GetPayload("grid"), absl::Cord("the grid"));
  EXPECT_FALSE(c_ran);
}

TEST(PassPipelineTest, ChecksInvariantsAfterEveryPassWhenAsked) {
  std::vector<std::string> checked;
  PassPipeline pipeline = TwoPasses();
  pipeline.SetInvariantChecker([&](const Schedule& s) {
    checked.push_back(s.name);
    return absl::OkStatus();
  });
  PipelineRunOptions options;
  options.check_invariants = true;
  ASSERT_OK(pipeline.Run(Schedule{}, options));
  EXPECT_EQ(checked, (std::vector<std::string>{"a", "ab"}));
  checked.clear();
  options.check_invariants = false;
  ASSERT_OK(pipeline.Run(Schedule{}, options));
  EXPECT_TRUE(checked.empty());
}

TEST(PassPipelineTest, AViolatedInvariantIsABugInThatPass) {
  PassPipeline pipeline = TwoPasses();
  pipeline.SetInvariantChecker([](const Schedule& s) {
    return s.name == "ab" ? absl::InvalidArgumentError("rank 0, index 1: bad") : absl::OkStatus();
  });
  PipelineRunOptions options;
  options.check_invariants = true;
  absl::StatusOr<PipelineResult> result = pipeline.Run(Schedule{}, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Message(result), "invariant violated after pass b: rank 0, index 1: bad");
}

}  // namespace
}  // namespace jitpipe::pass_pipeline_test
