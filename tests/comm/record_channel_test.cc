// The record channel (comm/record_channel.h) on loopback: the frames end to
// end, notices, and what a hub does with peers that die, send too much, or
// never answer. Links run in threads, as the ranks of a job would.
#include "comm/record_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

RecordChannelAddress Loopback(const RecordHub& hub) {
  RecordChannelAddress address = hub.address();
  address.hosts = {"127.0.0.1"};
  return address;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Links for ranks 1..n-1, connected while the hub accepts.
std::vector<std::unique_ptr<RecordLink>> ConnectAll(RecordHub& hub, int n) {
  std::vector<std::future<absl::StatusOr<std::unique_ptr<RecordLink>>>> pending;
  for (int r = 1; r < n; ++r) {
    pending.push_back(std::async(std::launch::async, [&hub, r] {
      return RecordLink::Connect(Loopback(hub), r, Soon());
    }));
  }
  EXPECT_OK(hub.AcceptAll(Soon()));
  std::vector<std::unique_ptr<RecordLink>> links;
  for (auto& p : pending) {
    absl::StatusOr<std::unique_ptr<RecordLink>> link = p.get();
    EXPECT_OK(link);
    links.push_back(link.ok() ? *std::move(link) : nullptr);
  }
  return links;
}

// A plain blocking socket to the hub that sends `bytes` and closes.
void SendRawAndClose(const RecordHub& hub, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(hub.address().port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)), 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
}

std::string Le(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

TEST(RecordChannelAddressTest, RoundTrips) {
  RecordChannelAddress a{{"10.0.0.1", "127.0.0.1"}, 4242, 18446744073709551615ull};
  ASSERT_OK_AND_ASSIGN(RecordChannelAddress b, RecordChannelAddress::Decode(a.Encode()));
  EXPECT_EQ(b.hosts, a.hosts);
  EXPECT_EQ(b.port, 4242);
  EXPECT_EQ(b.token, a.token);
}

TEST(RecordChannelAddressTest, MalformedTextIsRefused) {
  for (const char* text : {"", "4242", "4242 7", "0 7 h", "70000 7 h", "x 7 h", "1 y h", "1 2 h 4"}) {
    absl::StatusOr<RecordChannelAddress> a = RecordChannelAddress::Decode(text);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// Payloads of every size arrive by rank, each acked; rank 0's own slot is
// the caller's.
TEST(RecordChannelTest, PayloadsArriveByRank) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(4, 1 << 22));
  auto links = ConnectAll(*hub, 4);
  const std::vector<std::string> sent = {"", "", "x", std::string(3 << 20, 'z')};
  std::vector<std::future<absl::Status>> sends;
  for (int r = 1; r < 4; ++r) {
    sends.push_back(std::async(std::launch::async, [&, r] {
      return links[r - 1]->Send(sent[r], Soon());
    }));
  }
  std::vector<std::optional<std::string>> payloads(4);
  hub->Collect(&payloads, Soon());
  for (auto& s : sends) EXPECT_OK(s.get());
  EXPECT_EQ(payloads[0], std::nullopt);
  for (int r = 1; r < 4; ++r) EXPECT_THAT(payloads[r], Optional(sent[r])) << r;
}

// A payload that came another way first is kept, and the sender still acked.
TEST(RecordChannelTest, APayloadAlreadyThereIsNotReplaced) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(2, 1024));
  auto links = ConnectAll(*hub, 2);
  auto send = std::async(std::launch::async, [&] { return links[0]->Send("socket", Soon()); });
  std::vector<std::optional<std::string>> payloads = {std::nullopt, "mpi"};
  hub->Collect(&payloads, Soon());
  EXPECT_OK(send.get());
  EXPECT_THAT(payloads[1], Optional(std::string("mpi")));
}

TEST(RecordChannelTest, NoticesReachEveryLink) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(3, 1024));
  auto links = ConnectAll(*hub, 3);
  hub->NotifyFailure("rank 1 failed: stage exploded");
  for (auto& link : links) {
    std::string reason;
    EXPECT_EQ(link->WaitForNotice(&reason), RecordLink::Event::kNotice);
    EXPECT_EQ(reason, "rank 1 failed: stage exploded");
  }
  // A notice read before the payload's ack does not disturb Send, though
  // its cause holds the ack's and the notice's bytes.
  hub->NotifyFailure("A cause with an A and an F");
  auto send = std::async(std::launch::async, [&] { return links[0]->Send("r1", Soon()); });
  std::vector<std::optional<std::string>> payloads(3);
  hub->Collect(&payloads, absl::Now() + absl::Milliseconds(300));
  EXPECT_OK(send.get());
  EXPECT_THAT(payloads[1], Optional(std::string("r1")));
  EXPECT_EQ(payloads[2], std::nullopt);  // rank 2 never sent
}

// A cause longer than kMaxNoticeReason arrives cut to it; an empty one
// arrives empty.
TEST(RecordChannelTest, NoticeCausesAreBounded) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(3, 1024));
  auto links = ConnectAll(*hub, 3);
  const std::string long_cause(RecordHub::kMaxNoticeReason + 10, 'x');
  hub->NotifyFailure(long_cause);
  std::string reason;
  EXPECT_EQ(links[0]->WaitForNotice(&reason), RecordLink::Event::kNotice);
  EXPECT_EQ(reason, long_cause.substr(0, RecordHub::kMaxNoticeReason));
  hub->NotifyFailure("");
  EXPECT_EQ(links[0]->WaitForNotice(&reason), RecordLink::Event::kNotice);
  EXPECT_EQ(reason, "");
}

TEST(RecordChannelTest, WakeAndClosingEndTheWait) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(2, 1024));
  auto links = ConnectAll(*hub, 2);
  std::thread waker([&] { links[0]->Wake(); });
  std::string reason;
  EXPECT_EQ(links[0]->WaitForNotice(&reason), RecordLink::Event::kWoken);
  waker.join();
  hub.reset();  // rank 0 ended
  ASSERT_OK_AND_ASSIGN(auto hub2, RecordHub::Listen(2, 1024));
  auto links2 = ConnectAll(*hub2, 2);
  hub2.reset();
  EXPECT_EQ(links2[0]->WaitForNotice(&reason), RecordLink::Event::kClosed);
  EXPECT_EQ(links2[0]->Send("late", Soon()).code(), absl::StatusCode::kUnavailable);
}

// A rank that dies mid-payload counts as not arrived; Collect then waits
// only for the others.
TEST(RecordChannelTest, APeerThatDiesMidPayloadIsNotArrived) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(3, 1024));
  auto links = ConnectAll(*hub, 3);
  links[1].reset();  // rank 2's process is gone
  // A second connection claiming rank 1 is refused (one per rank)...
  SendRawAndClose(*hub, "JPRC" + Le(hub->address().token, 8) + Le(1, 4) + Le(100, 8) + "partial");
  // ...and rank 1 itself dies after half its payload, through a raw socket
  // standing in for its link.
  ASSERT_OK_AND_ASSIGN(auto hub3, RecordHub::Listen(2, 1024));
  SendRawAndClose(*hub3, "JPRC" + Le(hub3->address().token, 8) + Le(1, 4) + Le(100, 8) + "partial");
  std::vector<std::optional<std::string>> payloads(2);
  hub3->Collect(&payloads, Soon());
  EXPECT_EQ(payloads[1], std::nullopt);
  EXPECT_FALSE(hub3->connected(1));
  std::vector<std::optional<std::string>> first(3);
  hub->Collect(&first, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(first[1], std::nullopt);
  EXPECT_EQ(first[2], std::nullopt);
}

TEST(RecordChannelTest, APayloadOverTheLimitIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(2, 16));
  auto links = ConnectAll(*hub, 2);
  auto send = std::async(std::launch::async,
                         [&] { return links[0]->Send(std::string(17, 'x'), Soon()); });
  std::vector<std::optional<std::string>> payloads(2);
  hub->Collect(&payloads, Soon());
  EXPECT_EQ(send.get().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(payloads[1], std::nullopt);
}

TEST(RecordChannelTest, EveryWaitEndsAtItsDeadline) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(3, 1024));
  // Nobody connects.
  absl::Status accepted = hub->AcceptAll(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(accepted.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(accepted.message(), HasSubstr("ranks 1, 2 did not connect"));
  // A hub that takes the hello but never reads the payload: no ack.
  auto links = ConnectAll(*hub, 3);
  EXPECT_EQ(links[0]->Send("never taken", absl::Now() + absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // A hub that never answers the hello: the token check times out.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &any.sin_addr);
  socklen_t length = sizeof(any);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  getsockname(silent, reinterpret_cast<sockaddr*>(&any), &length);
  RecordChannelAddress quiet{{"127.0.0.1"}, ntohs(any.sin_port), 7};
  absl::StatusOr<std::unique_ptr<RecordLink>> link =
      RecordLink::Connect(quiet, 1, absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(link.status().message(), HasSubstr("timed out"));
  close(silent);
}

TEST(RecordChannelTest, AnotherJobsHubOrNoHubIsNotConnected) {
  ASSERT_OK_AND_ASSIGN(auto hub, RecordHub::Listen(2, 1024));
  RecordChannelAddress wrong = Loopback(*hub);
  wrong.token ^= 1;
  auto link = std::async(std::launch::async,
                         [&] { return RecordLink::Connect(wrong, 1, Soon()); });
  EXPECT_EQ(hub->AcceptAll(absl::Now() + absl::Milliseconds(300)).code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<std::unique_ptr<RecordLink>> refused = link.get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("rank 1 cannot reach rank 0's record channel"));
  RecordChannelAddress gone = Loopback(*hub);
  hub.reset();
  EXPECT_EQ(RecordLink::Connect(gone, 1, Soon()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace jitpipe
