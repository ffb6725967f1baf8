#include "scheduler/ir/action.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::action_test {
namespace {

TEST(ActionTest, FormatsEveryKindAsPyTorchDoes) {
  EXPECT_EQ(Action::Make(ActionKind::kForward, 0, 1).ToString(), "0F1");
  EXPECT_EQ(Action::Make(ActionKind::kBackward, 3, 0).ToString(), "3B0");
  EXPECT_EQ(Action::Make(ActionKind::kBackwardInput, 7, 2).ToString(), "7I2");
  EXPECT_EQ(Action::Make(ActionKind::kBackwardWeight, 7, 2).ToString(), "7W2");
  EXPECT_EQ(Action::Make(ActionKind::kSendF, 1, 0).ToString(), "1SEND_F0");
  EXPECT_EQ(Action::Make(ActionKind::kRecvF, 1, 1).ToString(), "1RECV_F1");
  EXPECT_EQ(Action::Make(ActionKind::kSendB, 2, 2).ToString(), "2SEND_B2");
  EXPECT_EQ(Action::Make(ActionKind::kRecvB, 1, 12).ToString(), "1RECV_B12");
  EXPECT_EQ(Action::StageWide(ActionKind::kUnshard, 0).ToString(), "0UNSHARD");
  EXPECT_EQ(Action::StageWide(ActionKind::kReshard, 3).ToString(), "3RESHARD");
  EXPECT_EQ(Action::StageWide(ActionKind::kReduceGrad, 2).ToString(), "2REDUCE_GRAD");
  EXPECT_EQ(Action::Make(ActionKind::kWaitSendF, 1, 2).ToString(), "1WAIT_SEND_F2");
  EXPECT_EQ(Action::Make(ActionKind::kWaitSendB, 3, 0).ToString(), "3WAIT_SEND_B0");
  EXPECT_EQ(Action::StageWide(ActionKind::kWaitReduceGrad, 2).ToString(), "2WAIT_REDUCE_GRAD");
  EXPECT_EQ(Action::Overlap({Action::Make(ActionKind::kForward, 4, 4),
                             Action::Make(ActionKind::kBackward, 3, 0)})
                .ToString(),
            "(4F4;3B0)OVERLAP_F_B");
  EXPECT_EQ(Action::Bubble().ToString(), "");
}

class ActionRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ActionRoundTripTest, ParseThenFormatGivesTheSameText) {
  ASSERT_OK_AND_ASSIGN(Action action, ParseAction(GetParam()));
  EXPECT_EQ(action.ToString(), GetParam());
}

TEST_P(ActionRoundTripTest, FormatThenParseGivesTheSameAction) {
  ASSERT_OK_AND_ASSIGN(Action action, ParseAction(GetParam()));
  ASSERT_OK_AND_ASSIGN(Action again, ParseAction(action.ToString()));
  EXPECT_EQ(again, action);
}

INSTANTIATE_TEST_SUITE_P(
    EveryKind, ActionRoundTripTest,
    ::testing::Values("0F1", "3B0", "7I2", "7W2", "1SEND_F0", "1RECV_F1", "2SEND_B2",
                      "1RECV_B12", "0UNSHARD", "3RESHARD", "2REDUCE_GRAD",
                      "(4F4;3B0)OVERLAP_F_B", "(0F7;7I3;7W3)OVERLAP_F_B", "2147483647F0",
                      "0F2147483647", "10REDUCE_GRAD", "1WAIT_SEND_F2", "3WAIT_SEND_B0",
                      "2WAIT_REDUCE_GRAD", "12WAIT_SEND_F10", "0W0"));

// The WAIT kinds start with "W", the weight backward's name: the parser
// must read the longer name, never W followed by garbage.
TEST(ActionTest, ParsesTheWaitKindsNotAWeightBackward) {
  ASSERT_OK_AND_ASSIGN(Action send_f, ParseAction("1WAIT_SEND_F2"));
  EXPECT_EQ(send_f, Action::Make(ActionKind::kWaitSendF, 1, 2));
  ASSERT_OK_AND_ASSIGN(Action send_b, ParseAction("3WAIT_SEND_B0"));
  EXPECT_EQ(send_b, Action::Make(ActionKind::kWaitSendB, 3, 0));
  ASSERT_OK_AND_ASSIGN(Action reduce, ParseAction("2WAIT_REDUCE_GRAD"));
  EXPECT_EQ(reduce, Action::StageWide(ActionKind::kWaitReduceGrad, 2));
  ASSERT_OK_AND_ASSIGN(Action weight, ParseAction("2W7"));
  EXPECT_EQ(weight, Action::Make(ActionKind::kBackwardWeight, 2, 7));
}

TEST(ActionTest, ParsesFieldsOfACompound) {
  ASSERT_OK_AND_ASSIGN(Action a, ParseAction("(4F4;3B0)OVERLAP_F_B"));
  EXPECT_EQ(a.kind, ActionKind::kOverlapFB);
  EXPECT_EQ(a.stage, -1);
  EXPECT_EQ(a.microbatch, kNoMicrobatch);
  ASSERT_EQ(a.sub_actions.size(), 2u);
  EXPECT_EQ(a.sub_actions[0], Action::Make(ActionKind::kForward, 4, 4));
  EXPECT_EQ(a.sub_actions[1], Action::Make(ActionKind::kBackward, 3, 0));
}

TEST(ActionTest, IgnoresSurroundingWhitespaceAsPyTorchDoes) {
  ASSERT_OK_AND_ASSIGN(Action a, ParseAction("  1SEND_F0\t"));
  EXPECT_EQ(a, Action::Make(ActionKind::kSendF, 1, 0));
}

struct BadAction {
  std::string text;
  std::string error;
};

class ActionParseErrorTest : public ::testing::TestWithParam<BadAction> {};

TEST_P(ActionParseErrorTest, SaysWhatWasExpectedWhere) {
  absl::StatusOr<Action> action = ParseAction(GetParam().text);
  ASSERT_FALSE(action.ok()) << GetParam().text << " parsed as " << action->ToString();
  EXPECT_EQ(action.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(action.status()), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ActionParseErrorTest,
    ::testing::Values(
        BadAction{"", "cannot parse action \"\": it is empty"},
        BadAction{"   ", "cannot parse action \"   \": it is empty"},
        BadAction{"0F1x",
                  "cannot parse action \"0F1x\": unexpected \"x\" at character 4; expected the "
                  "end of the action"},
        BadAction{"0F",
                  "cannot parse action \"0F\": the end of the text at character 3; expected a "
                  "microbatch number after F"},
        BadAction{"2REDUCE_GRAD1",
                  "cannot parse action \"2REDUCE_GRAD1\": unexpected \"1\" at character 13; "
                  "expected the end of the action"},
        BadAction{"F1",
                  "cannot parse action \"F1\": unexpected \"F\" at character 1; expected a "
                  "stage number"},
        BadAction{"0X1",
                  "cannot parse action \"0X1\": unexpected \"X\" at character 2; expected an "
                  "action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                  "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"0SEND1",
                  "cannot parse action \"0SEND1\": unexpected \"S\" at character 2; expected an "
                  "action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                  "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"2147483648F0",
                  "cannot parse action \"2147483648F0\": the stage number at character 1 "
                  "does not fit in 31 bits"},
        BadAction{"0F99999999999999999999",
                  "cannot parse action \"0F99999999999999999999\": the microbatch number "
                  "after F at character 3 does not fit in 31 bits"},
        BadAction{"01F1",
                  "cannot parse action \"01F1\": the stage number at character 1 has a "
                  "leading zero"},
        BadAction{"-1F0",
                  "cannot parse action \"-1F0\": unexpected \"-\" at character 1; expected a "
                  "stage number"},
        BadAction{"0f1",
                  "cannot parse action \"0f1\": unexpected \"f\" at character 2; expected an "
                  "action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                  "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"0WAIT_SEND_F",
                  "cannot parse action \"0WAIT_SEND_F\": the end of the text at character 13; "
                  "expected a microbatch number after WAIT_SEND_F"},
        BadAction{"0WAIT_REDUCE_GRAD3",
                  "cannot parse action \"0WAIT_REDUCE_GRAD3\": unexpected \"3\" at character "
                  "18; expected the end of the action"},
        BadAction{"0WAIT_SEND0",
                  "cannot parse action \"0WAIT_SEND0\": unexpected \"W\" at character 2; "
                  "expected an action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
                  "WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"1WAIT_SEND_X0",
                  "cannot parse action \"1WAIT_SEND_X0\": unexpected \"W\" at character 2; "
                  "expected an action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
                  "WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"0FB1",
                  "cannot parse action \"0FB1\": unexpected \"F\" at character 2; expected an "
                  "action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                  "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"},
        BadAction{"(4F4;3WAIT_SEND_B0)OVERLAP_F_B",
                  "cannot parse action \"(4F4;3WAIT_SEND_B0)OVERLAP_F_B\": the sub-action at "
                  "character 6 is WAIT_SEND_B; an OVERLAP_F_B holds only F, B, I and W"},
        BadAction{"(4F4;3B0)",
                  "cannot parse action \"(4F4;3B0)\": the end of the text at character 10; "
                  "expected OVERLAP_F_B after \")\""},
        BadAction{"(4F4;3B0",
                  "cannot parse action \"(4F4;3B0\": the end of the text at character 9; "
                  "expected \";\" or \")\""},
        BadAction{"(4F4;3B0)OVERLAP_F_Bx",
                  "cannot parse action \"(4F4;3B0)OVERLAP_F_Bx\": unexpected \"x\" at "
                  "character 21; expected the end of the action"},
        BadAction{"(4F4;3SEND_F0)OVERLAP_F_B",
                  "cannot parse action \"(4F4;3SEND_F0)OVERLAP_F_B\": the sub-action at "
                  "character 6 is SEND_F; an OVERLAP_F_B holds only F, B, I and W"},
        BadAction{"((4F4;3B0)OVERLAP_F_B;1F0)OVERLAP_F_B",
                  "cannot parse action \"((4F4;3B0)OVERLAP_F_B;1F0)OVERLAP_F_B\": unexpected "
                  "\"(\" at character 2; expected a stage number"},
        BadAction{"()OVERLAP_F_B",
                  "cannot parse action \"()OVERLAP_F_B\": unexpected \")\" at character 2; "
                  "expected a stage number"},
        BadAction{"0 F1",
                  "cannot parse action \"0 F1\": unexpected \" \" at character 2; expected an "
                  "action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                  "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD)"}));

TEST(ActionTest, KindPredicates) {
  EXPECT_TRUE(IsCompute(ActionKind::kOverlapFB));
  EXPECT_FALSE(IsCompute(ActionKind::kSendF));
  EXPECT_TRUE(IsSend(ActionKind::kSendB));
  EXPECT_TRUE(IsRecv(ActionKind::kRecvF));
  EXPECT_FALSE(HasMicrobatch(ActionKind::kReduceGrad));
  EXPECT_TRUE(HasMicrobatch(ActionKind::kRecvB));
  EXPECT_TRUE(HasMicrobatch(ActionKind::kWaitSendF));
  EXPECT_TRUE(HasMicrobatch(ActionKind::kWaitSendB));
  EXPECT_FALSE(HasMicrobatch(ActionKind::kWaitReduceGrad));
  EXPECT_FALSE(IsCompute(ActionKind::kWaitSendF));
  EXPECT_FALSE(IsSendRecv(ActionKind::kWaitSendB));
  EXPECT_TRUE(IsWaitSend(ActionKind::kWaitSendB));
  EXPECT_FALSE(IsWaitSend(ActionKind::kWaitReduceGrad));
  EXPECT_TRUE(IsWait(ActionKind::kWaitReduceGrad));
  EXPECT_FALSE(IsWait(ActionKind::kReduceGrad));
  EXPECT_EQ(WaitedSendKind(ActionKind::kWaitSendF), ActionKind::kSendF);
  EXPECT_EQ(WaitedSendKind(ActionKind::kWaitSendB), ActionKind::kSendB);
}

TEST(ActionTest, ForEachComputePartVisitsSubActionsInOrder) {
  ASSERT_OK_AND_ASSIGN(Action a, ParseAction("(4F4;3B0)OVERLAP_F_B"));
  std::vector<std::string> seen;
  ForEachComputePart(a, [&](const Action& part) { seen.push_back(part.ToString()); });
  EXPECT_EQ(seen, (std::vector<std::string>{"4F4", "3B0"}));
  seen.clear();
  ForEachComputePart(Action::Make(ActionKind::kSendF, 0, 0),
                     [&](const Action& part) { seen.push_back(part.ToString()); });
  EXPECT_TRUE(seen.empty());
}

// The readers' fast path takes exactly the simple actions ParseAction
// takes, with the same values, at the edges of its number rules; and, in
// place, stops where the action's text ends.
TEST(ActionTest, FastPathAgreesWithParseAction) {
  for (const char* text :
       {"0F0", "9B9", "10I10", "2147483647F0", "0F2147483647", "2147483648F0", "0F2147483648",
        "1234567890W1", "12345678901W1", "0F01", "00F0", "0F00", "1F", "1", "F1", "3SEND_F4",
        "3SEND_X4", "3SEND_F", "3RECV_B0", "3RECV_X0", "4RESHARD", "4RESHARDX", "4REDUCE_GRAD",
        "4REDUCE_GRAD0", "5UNSHARD", "5UNSHARE", "6WAIT_SEND_F7", "6WAIT_SEND_B7",
        "6WAIT_SEND_X7", "6WAIT_REDUCE_GRAD", "6WAIT_REDUCE_GRAD1", "6W7", "6WA", " 1F0",
        "(1F0;2B0)OVERLAP_F_B"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<Action> exact = ParseAction(text);
    Action fast;
    const bool taken = TryParseSimpleAction(text, &fast);
    if (taken) {
      ASSERT_TRUE(exact.ok()) << exact.status();
      EXPECT_EQ(fast, *exact);
    } else {
      // Not simple: whitespace, a compound, or an error ParseAction explains.
      EXPECT_TRUE(!exact.ok() || exact->is_compound() || absl::string_view(text)[0] == ' ');
    }
  }
  const std::string json = "12SEND_B34\", \"5RESHARD\"";
  Action a;
  const char* end = json.data() + json.size();
  const char* after = ParseSimpleActionPrefix(json.data(), end, &a);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after - json.data(), 10);
  EXPECT_EQ(a, Action::Make(ActionKind::kSendB, 12, 34));
  after = ParseSimpleActionPrefix(json.data() + 14, end, &a);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(*after, '"');
  EXPECT_EQ(a, Action::StageWide(ActionKind::kReshard, 5));
  EXPECT_EQ(ParseSimpleActionPrefix(json.data() + 10, end, &a), nullptr);  // at the quote
}

}  // namespace
}  // namespace jitpipe::action_test
