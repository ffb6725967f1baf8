// The tag matching the in-process and one-GPU fabrics share: per key, in
// posting order; the staged bytes counted while staged.
#include "comm/p2p_mailbox.h"

#include <string>

#include "gtest/gtest.h"

namespace jitpipe::p2p_mailbox_test {
namespace {

TEST(P2pMailboxTest, MatchesPerKeyInPostingOrderAndCountsStagedBytes) {
  P2pMailbox<int, std::string> box;
  const P2pKey a{0, 1, 7}, b{0, 1, 8};
  EXPECT_FALSE(box.TakeRecv(a).has_value());
  box.AddSend(a, "first", 100);
  box.AddSend(a, "second", 50);
  box.AddSend(b, "other tag", 10);
  EXPECT_EQ(box.in_flight(), 160);
  EXPECT_EQ(box.TakeSend(b).value(), "other tag");
  EXPECT_EQ(box.TakeSend(a).value(), "first");
  EXPECT_EQ(box.in_flight(), 50);
  EXPECT_EQ(box.TakeSend(a).value(), "second");
  EXPECT_FALSE(box.TakeSend(a).has_value());
  EXPECT_EQ(box.in_flight(), 0);
  EXPECT_EQ(box.peak_in_flight(), 160);
  box.AddRecv(P2pKey{1, 0, 7}, 3);
  box.AddRecv(P2pKey{1, 0, 7}, 4);
  EXPECT_FALSE(box.TakeRecv(a).has_value());  // another direction
  EXPECT_EQ(box.TakeRecv(P2pKey{1, 0, 7}).value(), 3);
  int left = 0;
  box.ForEachRecv([&](int& r) { left += r; });
  EXPECT_EQ(left, 4);
}

}  // namespace
}  // namespace jitpipe::p2p_mailbox_test
