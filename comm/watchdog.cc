#include "comm/watchdog.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace jitpipe {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

}  // namespace

Clock* RealClock() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

Watchdog::Watchdog(absl::Duration timeout, Handler on_timeout, Clock* clock)
    : timeout_(timeout), on_timeout_(std::move(on_timeout)), clock_(clock) {}

void Watchdog::Watch(uint64_t id, int owner, std::string what, Probe done) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  ops_.push_back({id, owner, std::move(what), now, std::move(done)});
}

void Watchdog::Forget(uint64_t id) {
  absl::MutexLock lock(&mu_);
  ops_.erase(std::remove_if(ops_.begin(), ops_.end(), [id](const Op& op) { return op.id == id; }),
             ops_.end());
}

absl::Status Watchdog::Check() {
  std::vector<std::pair<uint64_t, Probe>> probes;
  {
    absl::MutexLock lock(&mu_);
    if (fired_) return absl::OkStatus();
    for (const Op& op : ops_) probes.emplace_back(op.id, op.done);
  }
  std::vector<uint64_t> ended;
  for (const auto& [id, done] : probes) {
    absl::StatusOr<bool> finished = done();
    if (!finished.ok() || *finished) ended.push_back(id);
  }
  const absl::Time now = clock_->Now();
  absl::Status timed_out;
  int owner = -1;
  {
    absl::MutexLock lock(&mu_);
    ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                              [&](const Op& op) {
                                return std::find(ended.begin(), ended.end(), op.id) != ended.end();
                              }),
               ops_.end());
    if (fired_ || ops_.empty() || now - ops_.front().since <= timeout_) return absl::OkStatus();
    fired_ = true;
    owner = ops_.front().owner;
    timed_out = absl::DeadlineExceededError(absl::StrCat(
        "watchdog: ", ops_.front().what, " not complete after ", absl::FormatDuration(timeout_)));
  }
  if (on_timeout_) on_timeout_(owner, timed_out);
  return timed_out;
}

bool Watchdog::fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

size_t Watchdog::pending() const {
  absl::MutexLock lock(&mu_);
  return ops_.size();
}

WatchdogThread::WatchdogThread(Watchdog* watchdog, absl::Duration interval)
    : watchdog_(watchdog), interval_(interval), thread_([this] {
        while (!stop_.WaitForNotificationWithTimeout(interval_)) {
          if (!watchdog_->Check().ok()) return;  // fired: its handler took over
        }
      }) {}

WatchdogThread::~WatchdogThread() {
  stop_.Notify();
  thread_.join();
}

}  // namespace jitpipe
