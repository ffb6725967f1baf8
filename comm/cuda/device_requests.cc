#include "comm/cuda/device_requests.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe {

DeviceRequests::~DeviceRequests() {
  watchdog_thread_.reset();
  absl::MutexLock lock(&mu_);
  for (auto& [id, r] : requests_) events_.Give(r.done);
}

absl::StatusOr<RequestId> DeviceRequests::New(int rank, std::string what) {
  ASSIGN_OR_RETURN(cudaEvent_t done, events_.Take());
  absl::MutexLock lock(&mu_);
  if (aborted_) {
    events_.Give(done);
    return absl::AbortedError(abort_message_);
  }
  const RequestId id = ++last_id_;
  Request& r = requests_[id];
  r.rank = rank;
  r.what = std::move(what);
  r.done = done;
  if (watchdog_ != nullptr) {
    watchdog_->Watch(id, rank, absl::StrCat("rank ", rank, ": ", r.what), [this, id] {
      absl::MutexLock probe_lock(&mu_);
      absl::StatusOr<bool> done_now = Look(id);
      if (done_now.status().code() == absl::StatusCode::kNotFound) return absl::StatusOr<bool>(true);
      return done_now;
    });
  }
  return id;
}

cudaEvent_t DeviceRequests::done(RequestId id) const {
  absl::MutexLock lock(&mu_);
  return requests_.at(id).done;
}

std::string DeviceRequests::what(RequestId id) const {
  absl::MutexLock lock(&mu_);
  return requests_.at(id).what;
}

void DeviceRequests::Issued(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second.issued = true;
}

void DeviceRequests::Complete(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  it->second.issued = true;
  events_.Give(it->second.done);
  it->second.done = nullptr;
}

void DeviceRequests::Fail(RequestId id, absl::Status status) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  it->second.failed = true;
  it->second.status = std::move(status);
}

void DeviceRequests::Drop(RequestId id) {
  absl::MutexLock lock(&mu_);
  Forget(id);
}

absl::StatusOr<bool> DeviceRequests::Look(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("unknown request ", id));
  const Request& r = it->second;
  if (r.failed) return r.status;
  if (!r.issued) return false;
  if (r.done == nullptr) return true;
  return QueryEvent(r.done);
}

void DeviceRequests::Forget(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  events_.Give(it->second.done);
  requests_.erase(it);
  if (watchdog_ != nullptr) watchdog_->Forget(id);
}

absl::StatusOr<bool> DeviceRequests::Test(RequestId id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<bool> done = Look(id);
  if (done.status().code() == absl::StatusCode::kNotFound) return done;
  if (!done.ok() || *done) Forget(id);
  return done;
}

absl::Status DeviceRequests::Wait(RequestId id, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      absl::StatusOr<bool> done = Look(id);
      if (done.status().code() == absl::StatusCode::kNotFound) return done.status();
      if (!done.ok() || *done) {
        Forget(id);
        return done.status();
      }
      if (absl::Now() >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat("timed out after ",
                                                        absl::FormatDuration(timeout),
                                                        " waiting for ", requests_.at(id).what));
      }
    }
    absl::SleepFor(poll_sleep_);
  }
}

absl::StatusOr<bool> DeviceRequests::StreamWait(RequestId id, cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("unknown request ", id));
  const Request& r = it->second;
  if (r.failed) return r.status;
  if (!r.issued) return false;
  if (r.done != nullptr) CUDA_CALL(cudaStreamWaitEvent(stream, r.done, 0));
  return true;
}

void DeviceRequests::Abort(const std::string& message) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return;
  aborted_ = true;
  abort_message_ = message;
  for (auto& [id, r] : requests_) {
    if (r.failed) continue;
    if (r.issued && (r.done == nullptr || QueryEvent(r.done).value_or(false))) continue;
    r.failed = true;
    r.status = absl::AbortedError(absl::StrCat(message, " (while waiting for ", r.what, ")"));
  }
}

absl::Status DeviceRequests::AbortStatus() const {
  absl::MutexLock lock(&mu_);
  return aborted_ ? absl::AbortedError(abort_message_) : absl::OkStatus();
}

void DeviceRequests::StartWatchdog(absl::Duration timeout, absl::Duration interval,
                                   Watchdog::Handler on_timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (watchdog_ != nullptr) return;
    watchdog_ = std::make_unique<Watchdog>(timeout, std::move(on_timeout));
  }
  watchdog_thread_ = std::make_unique<WatchdogThread>(watchdog_.get(), interval);
}

}  // namespace jitpipe
