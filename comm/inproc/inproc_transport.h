// The in-process transport: every rank of a world is a thread of this
// process, and bytes move by real copies between the ranks' buffers (the
// leveldb NewMemEnv twin of the MPI and NCCL backends). The fabric is what
// every rank's transport posts into -- mailboxes, collectives, requests,
// the requested groups and the job's abort state: the in-process
// counterpart of MPI itself and comm/mpi/mpi_job.h. The world
// (inproc_world.h) owns the fabric and one transport per rank.
//
// Internal to comm/inproc: nothing else includes this header.
//
// Protocol: eager. A send whose receive is already posted copies straight
// into the receive buffer; otherwise the bytes are copied into the fabric's
// staging area and the send completes at once (its buffer may be reused, as
// after MPI's eager send); the receive copies them out when it is posted.
// Staged bytes are reported by InFlightBytes(). A receive whose matching
// send has another size fails naming both operations. Collectives complete
// when every member has posted; the last member to post reduces, in group
// order, so results are deterministic; members that post a different kind
// or size of collective at the same position of their group fail.
//
// Requests: each rank's live in a table of its own, with its own lock,
// which Test and Wait take alone; a post takes the fabric's lock (the
// mailboxes) and, to create or complete a request, its owner's table lock
// inside it. So a rank polling its requests does not queue behind the other
// ranks' posts. Wait polls its request for a few tens of microseconds
// before it sleeps when the world's ranks fit on the machine's hardware
// threads, so a receive posted just before its send completes without a
// futex sleep and wake; with more ranks than hardware threads it sleeps at
// once.
//
// Thread safety: the fabric and all its transports may be used from any
// number of threads.
#ifndef JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_
#define JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/op_label.h"
#include "comm/p2p_mailbox.h"
#include "comm/transport.h"

namespace jitpipe {

class InProcessFabric {
 public:
  // A fabric for `size` ranks. `on_abort` runs once, on the aborting thread
  // and without the fabric's lock, when the job is aborted.
  InProcessFabric(int size, std::function<void()> on_abort);
  InProcessFabric(const InProcessFabric&) = delete;
  InProcessFabric& operator=(const InProcessFabric&) = delete;

  int size() const { return size_; }

  // Records `groups` as requested (World::CreateGroups). Errors: CheckGroups'.
  absl::Status AddGroups(absl::Span<const Group> groups) ABSL_LOCKS_EXCLUDED(mu_);

  // Aborts the job on behalf of `rank` (Transport::Abort); the first wins.
  void Abort(int rank, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // OK until the job is aborted; then Aborted "rank <r> failed: <reason>".
  absl::Status AbortStatus() const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t InFlightBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t PeakInFlightBytes() const ABSL_LOCKS_EXCLUDED(mu_);

  // The transports' side (Transport's contract, for rank `self`).
  absl::StatusOr<RequestId> Send(int self, int peer, uint64_t tag,
                                 absl::Span<const std::byte> bytes, const OpInfo& info)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> Recv(int self, int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                 const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  // An all-reduce (output == input) or a reduce-scatter.
  absl::StatusOr<RequestId> PostCollective(int self, const Group& group, bool reduce_scatter,
                                           absl::Span<const float> input,
                                           absl::Span<float> output, ReduceOp op,
                                           const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> Test(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Wait(RequestId id, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Request {
    // Written under its table's lock; read without it only by Wait's poll
    // (the status is read under the lock afterwards).
    std::atomic<bool> done = false;
    absl::Status status;
    OpLabel what;
  };
  // One rank's requests. Ids are seq * size + rank (seq >= 1), so an id
  // names its table.
  struct RequestTable {
    absl::Mutex mu;
    uint64_t last_seq ABSL_GUARDED_BY(mu) = 0;
    // node_hash_map: Wait keeps a pointer to its Request while the lock is
    // released (polling, and inside Await), and posts insert meanwhile.
    absl::node_hash_map<RequestId, Request> requests ABSL_GUARDED_BY(mu);
  };
  struct PendingRecv {
    RequestId id;
    absl::Span<std::byte> bytes;
  };
  struct StagedSend {
    std::vector<std::byte> bytes;
    OpLabel what;
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

  absl::Status CheckPeer(int self, int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckGroup(int self, const Group& group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The table of the rank that posted `id`; null for an id no rank made.
  RequestTable* TableOf(RequestId id) const;
  // Requests are created and completed under mu_ (the matching decides),
  // and the owner's table lock (taken inside; never the other way round).
  RequestId NewRequest(int self, OpLabel what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(RequestId id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(RequestId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies a send's bytes into a posted receive and completes the receive.
  void Deliver(const PendingRecv& recv, absl::Span<const std::byte> bytes,
               const OpLabel& send_what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reduces in group order (deterministic) and completes every member.
  void Reduce(Collective& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int size_;
  const std::function<void()> on_abort_;
  // How long Wait polls its request before sleeping on the lock: long
  // enough to cover a peer's next action when every rank has a core of its
  // own (a futex sleep and wake cost several microseconds on a VM, more
  // than an empty action); zero when the ranks outnumber the hardware
  // threads, where a spinning waiter would take the core its peer needs.
  const absl::Duration spin_;

  const std::vector<std::unique_ptr<RequestTable>> tables_;  // by rank

  mutable absl::Mutex mu_;
  P2pMailbox<PendingRecv, StagedSend> mailbox_ ABSL_GUARDED_BY(mu_);
  std::set<std::vector<int>> groups_ ABSL_GUARDED_BY(mu_);  // requested
  std::map<std::pair<int, std::vector<int>>, uint64_t> next_collective_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::vector<int>, uint64_t>, Collective> collectives_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_message_ ABSL_GUARDED_BY(mu_);
};

// Rank `rank`'s Transport over `fabric`, which must outlive it.
std::unique_ptr<Transport> NewInProcessTransport(InProcessFabric* fabric, int rank);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_
