#include "comm/inproc/inproc_transport.h"

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

struct Request {
  bool done = false;
  absl::Status status;
  std::string what;  // "receive 2RECV_B3 from rank 3" for error messages
};

struct P2pKey {
  int src;
  int dst;
  uint64_t tag;
  friend bool operator==(const P2pKey&, const P2pKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const P2pKey& k) {
    return H::combine(std::move(h), k.src, k.dst, k.tag);
  }
};

struct PendingRecv {
  RequestId id;
  absl::Span<std::byte> bytes;
};

struct StagedSend {
  std::vector<std::byte> bytes;
  std::string what;
};

// One collective call, gathering its members' buffers until all have posted.
struct Collective {
  bool reduce_scatter = false;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;  // input elements per member
  std::vector<RequestId> ids;
  std::vector<absl::Span<const float>> inputs;
  std::vector<absl::Span<float>> outputs;
  int posted = 0;
};

std::string Describe(absl::string_view verb, const OpInfo& info, absl::string_view peer) {
  return absl::StrCat(verb, info.action.empty() ? "" : " ", info.action, " ", peer,
                      info.program_index >= 0 ? absl::StrCat(" (index ", info.program_index, ")")
                                              : "");
}

class Fabric;

// Rank r's view of the world.
class Endpoint final : public Transport {
 public:
  Endpoint(Fabric* world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override;
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data, ReduceOp op,
                                          const OpInfo& info) override;
  absl::StatusOr<RequestId> PostReduceScatter(const Group& group, absl::Span<const float> input,
                                              absl::Span<float> output, ReduceOp op,
                                              const OpInfo& info) override;
  absl::StatusOr<bool> Test(RequestId request) override;
  absl::Status Wait(RequestId request, absl::Duration timeout) override;
  void Abort(const std::string& reason) override;
  int64_t InFlightBytes() const override;
  int64_t PeakInFlightBytes() const override;

 private:
  Fabric* const world_;
  const int rank_;
};

class Fabric final : public InProcessWorld {
 public:
  explicit Fabric(int size) {
    for (int r = 0; r < size; ++r) {
      endpoints_.push_back(std::make_unique<Endpoint>(this, r));
      local_ranks_.push_back(r);
    }
  }

  Transport& transport(int rank) override { return *endpoints_[rank]; }
  int size() const override { return static_cast<int>(endpoints_.size()); }
  std::string name() const override { return "in-process"; }
  const std::vector<int>& local_ranks() const override { return local_ranks_; }
  SendCompletion send_completion() const override { return SendCompletion::kEager; }

  absl::Status Barrier(int world_rank, absl::Duration timeout) override {
    (void)world_rank;  // every rank is local: the barrier counts arrivals
    absl::MutexLock lock(&mu_);
    if (aborted_) return Stopped();
    const int64_t generation = barrier_generation_;
    if (++barrier_arrived_ == size()) {
      barrier_arrived_ = 0;
      ++barrier_generation_;
      return absl::OkStatus();
    }
    auto released = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return aborted_ || barrier_generation_ != generation;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&released), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", absl::FormatDuration(timeout),
          " waiting at the step barrier for the other ranks"));
    }
    return barrier_generation_ != generation ? absl::OkStatus() : Stopped();
  }

  // Every payload is here already: nothing moves.
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    (void)timeout;
    if (local.size() != endpoints_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("Gather: ", local.size(),
                                                     " payloads for ", size(), " ranks"));
    }
    return std::vector<std::string>(local.begin(), local.end());
  }

  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    (void)grace;
    std::vector<std::optional<std::string>> all(endpoints_.size());
    for (size_t w = 0; w < local.size() && w < all.size(); ++w) all[w] = local[w];
    return all;
  }

  void Abort(int world_rank, const std::string& reason) override { AbortRank(world_rank, reason); }
  bool aborted() override {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

  // Every operation completes or fails before the rank threads end, so
  // nothing writes into a buffer once the run has returned; the objects are
  // kept until the world goes all the same, as the contract says.
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    absl::MutexLock lock(&mu_);
    retained_.push_back(std::move(object));
  }
  void LeaveBeforeExit() override {}
  int64_t InFlightBytes() const override {
    absl::MutexLock lock(&mu_);
    return in_flight_;
  }
  int64_t PeakInFlightBytes() const override {
    absl::MutexLock lock(&mu_);
    return peak_in_flight_;
  }

  absl::StatusOr<RequestId> Send(int src, int dst, uint64_t tag, absl::Span<const std::byte> bytes,
                                 const OpInfo& info) {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckAlive(src, dst));
    const std::string what = Describe("send", info, absl::StrCat("to rank ", dst));
    RequestId id = NewRequest(what);
    P2pKey key{src, dst, tag};
    auto waiting = recvs_.find(key);
    if (waiting != recvs_.end() && !waiting->second.empty()) {
      PendingRecv recv = waiting->second.front();
      waiting->second.pop_front();
      Deliver(recv, bytes, what);
    } else {
      staged_[key].push_back({std::vector<std::byte>(bytes.begin(), bytes.end()), what});
      in_flight_ += static_cast<int64_t>(bytes.size());
      peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    }
    Complete(id, absl::OkStatus());  // eager: the caller's buffer is free
    return id;
  }

  absl::StatusOr<RequestId> Recv(int dst, int src, uint64_t tag, absl::Span<std::byte> bytes,
                                 const OpInfo& info) {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckAlive(dst, src));
    RequestId id = NewRequest(Describe("receive", info, absl::StrCat("from rank ", src)));
    P2pKey key{src, dst, tag};
    auto staged = staged_.find(key);
    if (staged != staged_.end() && !staged->second.empty()) {
      StagedSend send = std::move(staged->second.front());
      staged->second.pop_front();
      in_flight_ -= static_cast<int64_t>(send.bytes.size());
      Deliver({id, bytes}, send.bytes, send.what);
    } else {
      recvs_[key].push_back({id, bytes});
    }
    return id;
  }

  absl::StatusOr<RequestId> PostCollective(int rank, const Group& group, bool reduce_scatter,
                                           absl::Span<const float> input, absl::Span<float> output,
                                           ReduceOp op, const OpInfo& info) {
    absl::MutexLock lock(&mu_);
    if (aborted_) return absl::AbortedError(abort_message_);
    const int index = group.IndexOf(rank);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in the group"));
    }
    const uint64_t seq = next_collective_[{rank, group.ranks}]++;
    Collective& c = collectives_[{group.ranks, seq}];
    if (c.ids.empty()) {
      c.reduce_scatter = reduce_scatter;
      c.op = op;
      c.count = input.size();
      c.ids.assign(group.ranks.size(), 0);
      c.inputs.resize(group.ranks.size());
      c.outputs.resize(group.ranks.size());
    }
    RequestId id = NewRequest(Describe(reduce_scatter ? "reduce-scatter" : "all-reduce", info,
                                       absl::StrCat("over ", group.ranks.size(), " ranks")));
    if (c.reduce_scatter != reduce_scatter || c.count != input.size()) {
      Complete(id, absl::InvalidArgumentError(absl::StrCat(
                       "rank ", rank, " posted a different collective or size at position ",
                       seq, " of its group")));
      return id;
    }
    c.ids[index] = id;
    c.inputs[index] = input;
    c.outputs[index] = output;
    if (++c.posted == static_cast<int>(group.ranks.size())) {
      Reduce(c);
      collectives_.erase({group.ranks, seq});
    }
    return id;
  }

  absl::StatusOr<bool> Test(RequestId id) {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("unknown request ", id));
    if (!it->second.done) return false;
    absl::Status status = it->second.status;
    requests_.erase(it);
    if (!status.ok()) return status;
    return true;
  }

  absl::Status Wait(RequestId id, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return absl::NotFoundError(absl::StrCat("unknown request ", id));
    Request* request = &it->second;
    auto done = [request]() { return request->done; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat("timed out after ",
                                                      absl::FormatDuration(timeout),
                                                      " waiting for ", request->what));
    }
    absl::Status status = request->status;
    requests_.erase(id);
    return status;
  }

  void AbortRank(int rank, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_message_ = absl::StrCat("rank ", rank, " failed: ", reason);
    for (auto& [id, request] : requests_) {
      if (!request.done) {
        request.done = true;
        request.status = absl::AbortedError(absl::StrCat(abort_message_, " (while waiting for ",
                                                         request.what, ")"));
      }
    }
  }

 private:
  // A barrier (or a wait for one) once the job is aborted.
  static absl::Status Stopped() { return absl::AbortedError("stopped: another rank failed"); }

  absl::Status CheckAlive(int self, int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (aborted_) return absl::AbortedError(abort_message_);
    if (peer < 0 || peer >= size() || peer == self) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", self, ": invalid peer ", peer));
    }
    return absl::OkStatus();
  }

  RequestId NewRequest(std::string what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RequestId id = ++last_id_;
    requests_[id].what = std::move(what);
    return id;
  }

  void Complete(RequestId id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Request& r = requests_[id];
    r.done = true;
    r.status = std::move(status);
  }

  // Copies a send's bytes into a posted receive and completes the receive.
  void Deliver(const PendingRecv& recv, absl::Span<const std::byte> bytes,
               const std::string& send_what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bytes.size() != recv.bytes.size()) {
      Complete(recv.id, absl::InvalidArgumentError(absl::StrCat(
                            requests_[recv.id].what, " expects ", recv.bytes.size(),
                            " bytes but the matching ", send_what, " has ", bytes.size())));
      return;
    }
    if (!bytes.empty()) std::memcpy(recv.bytes.data(), bytes.data(), bytes.size());
    Complete(recv.id, absl::OkStatus());
  }

  // Reduces in group order (deterministic) and completes every member.
  void Reduce(Collective& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
      if (c.outputs[m].size() != shard) {
        Complete(c.ids[m], absl::InvalidArgumentError(absl::StrCat(
                               "collective output holds ", c.outputs[m].size(),
                               " elements; expected ", shard)));
        continue;
      }
      std::memcpy(c.outputs[m].data(), sum.data() + begin, shard * sizeof(float));
      Complete(c.ids[m], absl::OkStatus());
    }
  }

  std::vector<std::unique_ptr<Endpoint>> endpoints_;  // const after construction
  std::vector<int> local_ranks_;                      // 0 .. size - 1

  mutable absl::Mutex mu_;
  RequestId last_id_ ABSL_GUARDED_BY(mu_) = 0;
  // node_hash_map: Wait() keeps a pointer to its Request while the lock is
  // released inside Await, and other threads insert meanwhile.
  absl::node_hash_map<RequestId, Request> requests_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<P2pKey, std::deque<PendingRecv>> recvs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<P2pKey, std::deque<StagedSend>> staged_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, std::vector<int>>, uint64_t> next_collective_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::vector<int>, uint64_t>, Collective> collectives_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_message_ ABSL_GUARDED_BY(mu_);
  int barrier_arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t barrier_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const void>> retained_ ABSL_GUARDED_BY(mu_);
};

int Endpoint::size() const { return world_->size(); }

absl::StatusOr<RequestId> Endpoint::PostSend(int peer, uint64_t tag,
                                             absl::Span<const std::byte> bytes,
                                             const OpInfo& info) {
  return world_->Send(rank_, peer, tag, bytes, info);
}

absl::StatusOr<RequestId> Endpoint::PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                             const OpInfo& info) {
  return world_->Recv(rank_, peer, tag, bytes, info);
}

absl::StatusOr<RequestId> Endpoint::PostAllReduce(const Group& group, absl::Span<float> data,
                                                  ReduceOp op, const OpInfo& info) {
  return world_->PostCollective(rank_, group, /*reduce_scatter=*/false, data, data, op, info);
}

absl::StatusOr<RequestId> Endpoint::PostReduceScatter(const Group& group,
                                                      absl::Span<const float> input,
                                                      absl::Span<float> output, ReduceOp op,
                                                      const OpInfo& info) {
  return world_->PostCollective(rank_, group, /*reduce_scatter=*/true, input, output, op, info);
}

absl::StatusOr<bool> Endpoint::Test(RequestId request) { return world_->Test(request); }

absl::Status Endpoint::Wait(RequestId request, absl::Duration timeout) {
  return world_->Wait(request, timeout);
}

void Endpoint::Abort(const std::string& reason) { world_->AbortRank(rank_, reason); }

int64_t Endpoint::InFlightBytes() const { return world_->InFlightBytes(); }
int64_t Endpoint::PeakInFlightBytes() const { return world_->PeakInFlightBytes(); }

}  // namespace

std::unique_ptr<InProcessWorld> CreateInProcessWorld(int size) {
  return std::make_unique<Fabric>(size);
}

}  // namespace jitpipe
