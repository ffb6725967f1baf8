// The watchdog's logic (comm/watchdog.h) on a fake clock: what it watches,
// what it drops, when it fires and what it says. One test runs the thread.
#include "comm/watchdog.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::watchdog_test {
namespace {

using ::jitpipe::testing::Message;

class FakeClock final : public Clock {
 public:
  absl::Time Now() override { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::UnixEpoch();
};

// An operation whose completion the test decides.
struct FakeOp {
  absl::StatusOr<bool> state = false;
  Watchdog::Probe probe() {
    return [this] { return state; };
  }
};

struct Fired {
  int owner = -1;
  absl::Status status;
  int calls = 0;
};

Watchdog::Handler Record(Fired* fired) {
  return [fired](int owner, const absl::Status& status) {
    fired->owner = owner;
    fired->status = status;
    ++fired->calls;
  };
}

TEST(WatchdogTest, FiresOnceWhenTheOldestPendingOperationOutlivesTheTimeout) {
  FakeClock clock;
  Fired fired;
  Watchdog watchdog(absl::Seconds(10), Record(&fired), &clock);
  FakeOp recv, send;
  watchdog.Watch(1, 1, "rank 1: receive 1RECV_F0 from rank 0 (index 0)", recv.probe());
  clock.Advance(absl::Seconds(4));
  watchdog.Watch(2, 0, "rank 0: send 0SEND_F0 to rank 1 (index 1)", send.probe());
  clock.Advance(absl::Seconds(6));  // the receive is exactly 10 s old: not over yet
  EXPECT_OK(watchdog.Check());
  EXPECT_EQ(fired.calls, 0);
  clock.Advance(absl::Milliseconds(1));
  const absl::Status status = watchdog.Check();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Message(status),
            "watchdog: rank 1: receive 1RECV_F0 from rank 0 (index 0) not complete after 10s");
  EXPECT_EQ(fired.calls, 1);
  EXPECT_EQ(fired.owner, 1);
  EXPECT_EQ(fired.status, status);
  EXPECT_TRUE(watchdog.fired());
  clock.Advance(absl::Seconds(60));
  EXPECT_OK(watchdog.Check());  // once only
  EXPECT_EQ(fired.calls, 1);
}

// Completed and failed operations are dropped at the next round (a failure
// is its owner's to report); so are those forgotten. Only what is still
// pending can time out, measured from when it was watched.
TEST(WatchdogTest, DropsOperationsThatEndedOrWereForgotten) {
  FakeClock clock;
  Fired fired;
  Watchdog watchdog(absl::Seconds(1), Record(&fired), &clock);
  FakeOp done, failed, forgotten, late;
  watchdog.Watch(1, 0, "done", done.probe());
  watchdog.Watch(2, 0, "failed", failed.probe());
  watchdog.Watch(3, 2, "forgotten", forgotten.probe());
  EXPECT_EQ(watchdog.pending(), 3u);
  done.state = true;
  failed.state = absl::AbortedError("rank 2 failed");
  watchdog.Forget(3);
  watchdog.Forget(99);  // unknown: ignored
  EXPECT_OK(watchdog.Check());
  EXPECT_EQ(watchdog.pending(), 0u);
  clock.Advance(absl::Seconds(5));
  watchdog.Watch(4, 3, "late", late.probe());
  clock.Advance(absl::Milliseconds(900));
  EXPECT_OK(watchdog.Check());
  EXPECT_EQ(fired.calls, 0);
  clock.Advance(absl::Milliseconds(200));
  EXPECT_EQ(watchdog.Check().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(fired.owner, 3);
}

// The oldest pending operation is the one named, even when a younger one
// was watched first and completed.
TEST(WatchdogTest, NamesTheOldestOperationStillPending) {
  FakeClock clock;
  Fired fired;
  Watchdog watchdog(absl::Seconds(2), Record(&fired), &clock);
  FakeOp a, b, c;
  watchdog.Watch(1, 0, "a", a.probe());
  clock.Advance(absl::Seconds(1));
  watchdog.Watch(2, 1, "b", b.probe());
  watchdog.Watch(3, 2, "c", c.probe());
  a.state = true;
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(Message(watchdog.Check()), "watchdog: b not complete after 2s");
  EXPECT_EQ(fired.owner, 1);
}

// A clock that only moves when an operation is probed: each probe is 10 ms.
// Thread-safe, for the thread tests below.
class ProbeStepClock final : public Clock {
 public:
  absl::Time Now() override { return absl::UnixEpoch() + absl::Milliseconds(ms_.load()); }
  void Step() { ms_ += 10; }

 private:
  std::atomic<int64_t> ms_{0};
};

// The thread keeps checking until the watchdog fires: with time advancing
// 10 ms per probe and a 30 ms timeout, it fires at the fourth probe (40 ms
// > 30 ms) and probes no more -- however late the thread is scheduled.
TEST(WatchdogTest, ItsThreadChecksUntilItFires) {
  ProbeStepClock clock;
  absl::Notification fired;
  std::atomic<int> owner{-1};
  Watchdog watchdog(
      absl::Milliseconds(30),
      [&](int o, const absl::Status&) {
        owner = o;
        fired.Notify();
      },
      &clock);
  std::atomic<int> probes{0};
  watchdog.Watch(7, 5, "stuck", [&]() -> absl::StatusOr<bool> {
    ++probes;
    clock.Step();
    return false;
  });
  {
    WatchdogThread thread(&watchdog, absl::Milliseconds(1));
    ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  EXPECT_EQ(owner, 5);
  EXPECT_EQ(probes, 4);
}

// On the real clock: a probe that never completes makes the handler run,
// and never before the timeout has passed since the operation was watched.
TEST(WatchdogTest, ItsThreadFiresOnTheRealClockAfterTheTimeout) {
  absl::Notification fired;
  Watchdog watchdog(absl::Milliseconds(30),
                    [&](int, const absl::Status&) { fired.Notify(); });
  const absl::Time start = absl::Now();
  watchdog.Watch(7, 5, "stuck", []() -> absl::StatusOr<bool> { return false; });
  {
    WatchdogThread thread(&watchdog, absl::Milliseconds(5));
    ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  EXPECT_GT(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_TRUE(watchdog.fired());
}

}  // namespace
}  // namespace jitpipe::watchdog_test
