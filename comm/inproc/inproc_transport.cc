#include "comm/inproc/inproc_transport.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "comm/fabric_transport.h"
#include "comm/world.h"

namespace jitpipe {

namespace {

// Long enough for a handful of empty actions on the peer's core.
constexpr absl::Duration kSpinWhenEveryRankHasACore = absl::Microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <typename T>
std::vector<std::unique_ptr<T>> MakeTables(int size) {
  std::vector<std::unique_ptr<T>> tables;
  for (int r = 0; r < size; ++r) tables.push_back(std::make_unique<T>());
  return tables;
}

}  // namespace

InProcessFabric::InProcessFabric(int size, std::function<void()> on_abort)
    : size_(size),
      on_abort_(std::move(on_abort)),
      spin_(size <= DefaultThreads() ? kSpinWhenEveryRankHasACore : absl::ZeroDuration()),
      tables_(MakeTables<RequestTable>(size)) {}

absl::Status InProcessFabric::AddGroups(absl::Span<const Group> groups) {
  RETURN_IF_ERROR(CheckGroups(groups, size_));
  absl::MutexLock lock(&mu_);
  for (const Group& group : groups) groups_.insert(group.ranks);
  return absl::OkStatus();
}

void InProcessFabric::Abort(int rank, const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_message_ = RankFailed(rank, reason);
    for (const std::unique_ptr<RequestTable>& table : tables_) {
      absl::MutexLock table_lock(&table->mu);
      for (auto& [id, request] : table->requests) {
        if (!request.done.load(std::memory_order_relaxed)) {
          request.status = absl::AbortedError(absl::StrCat(
              abort_message_, " (while waiting for ", request.what.ToString(), ")"));
          request.done.store(true, std::memory_order_release);
        }
      }
    }
  }
  if (on_abort_) on_abort_();
}

absl::Status InProcessFabric::AbortStatus() const {
  absl::MutexLock lock(&mu_);
  return aborted_ ? absl::AbortedError(abort_message_) : absl::OkStatus();
}

int64_t InProcessFabric::InFlightBytes() const {
  absl::MutexLock lock(&mu_);
  return mailbox_.in_flight();
}

int64_t InProcessFabric::PeakInFlightBytes() const {
  absl::MutexLock lock(&mu_);
  return mailbox_.peak_in_flight();
}

absl::Status InProcessFabric::CheckPeer(int self, int peer) const {
  if (aborted_) return absl::AbortedError(abort_message_);
  if (peer < 0 || peer >= size_ || peer == self) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", self, ": invalid peer ", peer));
  }
  return absl::OkStatus();
}

absl::Status InProcessFabric::CheckGroup(int self, const Group& group) const {
  if (aborted_) return absl::AbortedError(abort_message_);
  if (group.IndexOf(self) < 0) return NotAMemberError(self, group);
  if (!IsImplicitGroup(group, size_) && !groups_.contains(group.ranks)) {
    return NotRequestedError(self, group);
  }
  return absl::OkStatus();
}

InProcessFabric::RequestTable* InProcessFabric::TableOf(RequestId id) const {
  const RequestId rank = id % static_cast<RequestId>(size_);
  return id < static_cast<RequestId>(size_) ? nullptr : tables_[rank].get();
}

RequestId InProcessFabric::NewRequest(int self, OpLabel what) {
  RequestTable& table = *tables_[self];
  absl::MutexLock lock(&table.mu);
  const RequestId id = ++table.last_seq * static_cast<RequestId>(size_) + self;
  table.requests[id].what = std::move(what);
  return id;
}

void InProcessFabric::Complete(RequestId id, absl::Status status) {
  RequestTable& table = *TableOf(id);
  absl::MutexLock lock(&table.mu);
  Request& r = table.requests[id];
  r.status = std::move(status);
  r.done.store(true, std::memory_order_release);
}

std::string InProcessFabric::Describe(RequestId id) const {
  RequestTable& table = *TableOf(id);
  absl::MutexLock lock(&table.mu);
  auto it = table.requests.find(id);
  return it == table.requests.end() ? absl::StrCat("request ", id) : it->second.what.ToString();
}

absl::StatusOr<RequestId> InProcessFabric::Send(int self, int peer, uint64_t tag,
                                                absl::Span<const std::byte> bytes,
                                                const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPeer(self, peer));
  const OpLabel what = OpLabel::Send(peer, info);
  RequestId id = NewRequest(self, what);
  const P2pKey key{self, peer, tag};
  if (std::optional<PendingRecv> recv = mailbox_.TakeRecv(key); recv.has_value()) {
    Deliver(*recv, bytes, what);
  } else {
    mailbox_.AddSend(key, {std::vector<std::byte>(bytes.begin(), bytes.end()), what},
                     static_cast<int64_t>(bytes.size()));
  }
  Complete(id, absl::OkStatus());  // eager: the caller's buffer is free
  return id;
}

absl::StatusOr<RequestId> InProcessFabric::Recv(int self, int peer, uint64_t tag,
                                                absl::Span<std::byte> bytes, const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPeer(self, peer));
  RequestId id = NewRequest(self, OpLabel::Receive(peer, info));
  const P2pKey key{peer, self, tag};
  if (std::optional<StagedSend> send = mailbox_.TakeSend(key); send.has_value()) {
    Deliver({id, bytes}, send->bytes, send->what);
  } else {
    mailbox_.AddRecv(key, {id, bytes});
  }
  return id;
}

absl::StatusOr<RequestId> InProcessFabric::PostCollective(int self, const Group& group,
                                                          bool reduce_scatter,
                                                          absl::Span<const float> input,
                                                          absl::Span<float> output, ReduceOp op,
                                                          const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckGroup(self, group));
  const size_t members = group.ranks.size();
  const OpLabel what = OpLabel::Collective(reduce_scatter, members, info);
  if (reduce_scatter) {
    RETURN_IF_ERROR(CheckReduceScatterSizes(self, what, input.size(), output.size(), members));
  }
  const int index = group.IndexOf(self);
  const uint64_t seq = next_collective_[{self, group.ranks}]++;
  Collective& c = collectives_[{group.ranks, seq}];
  if (c.ids.empty()) {
    c.reduce_scatter = reduce_scatter;
    c.op = op;
    c.count = input.size();
    c.ids.assign(members, 0);
    c.inputs.resize(members);
    c.outputs.resize(members);
  }
  RequestId id = NewRequest(self, what);
  if (c.reduce_scatter != reduce_scatter || c.count != input.size()) {
    Complete(id, absl::InvalidArgumentError(absl::StrCat(
                     "rank ", self, " posted a different collective or size at position ", seq,
                     " of group ", group.ToString())));
    return id;
  }
  c.ids[index] = id;
  c.inputs[index] = input;
  c.outputs[index] = output;
  if (++c.posted == static_cast<int>(members)) {
    Reduce(c);
    collectives_.erase({group.ranks, seq});
  }
  return id;
}

absl::StatusOr<bool> InProcessFabric::Test(RequestId id) {
  RequestTable* table = TableOf(id);
  if (table == nullptr) return absl::NotFoundError(absl::StrCat("unknown request ", id));
  absl::MutexLock lock(&table->mu);
  auto it = table->requests.find(id);
  if (it == table->requests.end()) {
    return absl::NotFoundError(absl::StrCat("unknown request ", id));
  }
  if (!it->second.done.load(std::memory_order_relaxed)) return false;
  absl::Status status = std::move(it->second.status);
  table->requests.erase(it);
  if (!status.ok()) return status;
  return true;
}

absl::Status InProcessFabric::Wait(RequestId id, absl::Duration timeout) {
  RequestTable* table = TableOf(id);
  if (table == nullptr) return absl::NotFoundError(absl::StrCat("unknown request ", id));
  const Request* request = nullptr;
  {
    absl::MutexLock lock(&table->mu);
    auto it = table->requests.find(id);
    if (it == table->requests.end()) {
      return absl::NotFoundError(absl::StrCat("unknown request ", id));
    }
    if (it->second.done.load(std::memory_order_relaxed)) {
      absl::Status status = std::move(it->second.status);
      table->requests.erase(it);
      return status;
    }
    request = &it->second;
  }
  // Only Wait and Test for `id` erase its entry, and the caller owns `id`:
  // the node stays where it is while the lock is released.
  const absl::Time deadline = absl::Now() + timeout;
  if (spin_ > absl::ZeroDuration()) {
    const absl::Time spin_until = std::min(deadline, absl::Now() + spin_);
    do {
      for (int i = 0; i < 64 && !request->done.load(std::memory_order_acquire); ++i) CpuRelax();
    } while (!request->done.load(std::memory_order_acquire) && absl::Now() < spin_until);
  }
  absl::MutexLock lock(&table->mu);
  auto done = [request]() { return request->done.load(std::memory_order_relaxed); };
  if (!table->mu.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::FormatDuration(timeout), " waiting for ", request->what.ToString()));
  }
  absl::Status status = request->status;
  table->requests.erase(id);
  return status;
}

void InProcessFabric::Deliver(const PendingRecv& recv, absl::Span<const std::byte> bytes,
                              const OpLabel& send_what) {
  if (bytes.size() != recv.bytes.size()) {
    Complete(recv.id, absl::InvalidArgumentError(absl::StrCat(
                          Describe(recv.id), " expects ", recv.bytes.size(),
                          " bytes but the matching ", send_what.ToString(), " has ", bytes.size())));
    return;
  }
  if (!bytes.empty()) std::memcpy(recv.bytes.data(), bytes.data(), bytes.size());
  Complete(recv.id, absl::OkStatus());
}

void InProcessFabric::Reduce(Collective& c) {
  const size_t members = c.ids.size();
  std::vector<float> sum(c.inputs[0].begin(), c.inputs[0].end());
  for (size_t m = 1; m < members; ++m) {
    for (size_t i = 0; i < c.count; ++i) sum[i] += c.inputs[m][i];
  }
  if (c.op == ReduceOp::kAverage) {
    for (float& x : sum) x /= static_cast<float>(members);
  }
  const size_t shard = c.reduce_scatter ? c.count / members : c.count;
  for (size_t m = 0; m < members; ++m) {
    const size_t begin = c.reduce_scatter ? m * shard : 0;
    if (shard > 0) std::memcpy(c.outputs[m].data(), sum.data() + begin, shard * sizeof(float));
    Complete(c.ids[m], absl::OkStatus());
  }
}

std::unique_ptr<Transport> NewInProcessTransport(InProcessFabric* fabric, int rank) {
  return std::make_unique<FabricTransport<InProcessFabric>>(fabric, rank);
}

}  // namespace jitpipe
