#include "scheduler/analysis/pair_order.h"

#include <string>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/analysis/grid_report.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::pair_order_test {
namespace {

using ::jitpipe::testing::Message;

absl::Status Check(const std::string& csv, int grid_rows = 0) {
  absl::StatusOr<Schedule> s = ParseScheduleCsv(csv);
  if (!s.ok()) return s.status();
  absl::StatusOr<CommPositions> positions = MatchSendRecv(*s);
  if (!positions.ok()) return positions.status();
  return CheckPairOrder(*s, *positions, grid_rows);
}

TEST(PairOrderTest, RecvsInSendOrderPass) {
  EXPECT_OK(Check("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                  "1RECV_F0,1RECV_F1,1F1,1F0,1B0,1SEND_B0,1B1,1SEND_B1\n"));
}

// Only the order per ordered pair counts: rank 0 interleaves its RECVs from
// rank 1 with its SENDs to it however it likes.
TEST(PairOrderTest, EachDirectionIsItsOwnPair) {
  EXPECT_OK(Check("0F0,0SEND_F0,0RECV_B0,0F1,0SEND_F1,0B0,0RECV_B1,0B1\n"
                  "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n"));
}

constexpr char kOutOfOrder[] =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1RECV_F1,1F1,1B1,1SEND_B1,1B0,1SEND_B0\n";

TEST(PairOrderTest, NamesTheFirstRecvOutOfOrder) {
  // Rank 1 sends B1 before B0; rank 0 receives B0 first.
  absl::Status status = Check(kOutOfOrder);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status),
            "rank 0, index 4 (0RECV_B0): out of order with rank 1: rank 1 sends 1SEND_B1 "
            "(index 5) before 1SEND_B0 (index 7), but this rank receives 0RECV_B0 before "
            "0RECV_B1 (index 6); under strict rendezvous semantics sends and receives between "
            "two ranks match in posting order");
  EXPECT_FALSE(GridOf(status).has_value());
}

TEST(PairOrderTest, GridMarksTheRecv) {
  absl::Status status = Check(kOutOfOrder, 3);
  ASSERT_TRUE(GridOf(status).has_value());
  EXPECT_EQ(*GridOf(status),
            "        Rank 0   Rank 1  \n"
            "  (steps 0-2 not shown)\n"
            "Step 3: 0SEND_F1 1F1     \n"
            "Step 4: 0RECV_B0 1B1      <-- ERROR HERE\n"
            "Step 5: 0B0      1SEND_B1\n"
            "  (steps 6-7 not shown)\n");
}

}  // namespace
}  // namespace jitpipe::pair_order_test
