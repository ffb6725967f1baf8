// One process's share of an MPI job: the communicators, the one lock every
// MPI call of the process is made under, the job's abort state and the
// polling loop every bounded wait uses. The transport (mpi_transport.cc) and
// the context (mpi_context.cc) are built on it.
//
// Internal to comm/mpi: this header includes mpi.h.
//
// Communicators (each a duplicate or split of MPI_COMM_WORLD, each with
// MPI_ERRORS_RETURN), so that no two kinds of traffic can match each other:
//   p2p      the transport's sends and receives (tags are the runtime's)
//   dp       this pipeline rank's data-parallel group (MPI_Comm_split with
//            color = pipeline rank, key = replica: group index = replica)
//   world    collectives over the whole world
//   job      the context's job-level collectives (barrier, broadcast, gather)
//   control  abort notices and the payloads collected after a failure
//
// Locking: MPI_THREAD_SERIALIZED is all this needs. mu_ is held only for
// the duration of nonblocking MPI calls (post, test, probe, cancel), never
// while a thread sleeps or waits.
//
// Thread safety: all methods may be called from any thread.
#ifndef JITPIPE_COMM_MPI_MPI_WORLD_H_
#define JITPIPE_COMM_MPI_MPI_WORLD_H_

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/transport.h"

namespace jitpipe {

// How a waiting thread polls: it yields between the first `spin_polls`
// polls, then sleeps `sleep` between polls (oversubscribed ranks must not
// busy-spin; ../shared/reference/ecosystem.md 4.3).
struct PollPolicy {
  int spin_polls = 64;
  absl::Duration sleep = absl::Microseconds(50);
};

class MpiWorld {
 public:
  // Tags on the control communicator.
  static constexpr int kAbortTag = 1;
  static constexpr int kPayloadTag = 2;
  // The longest abort reason a notice carries (longer ones are cut).
  static constexpr int kMaxReasonBytes = 1024;

  // REQUIRES: MPI is initialised; dp >= 1 divides the world size. Creates
  // the communicators: collective over MPI_COMM_WORLD, so every process
  // calls it once, in the same order. Errors: InvalidArgument when dp does
  // not divide the world size; the MPI call's status otherwise.
  static absl::StatusOr<std::unique_ptr<MpiWorld>> Create(int dp, PollPolicy poll);

  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  ~MpiWorld() = default;  // makes no MPI call: MPI may be finalised by then

  // Retires the world's own requests (the abort-notice receive, the notices
  // sent). REQUIRES: called once, right before MPI_Finalize or MPI_Abort.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int pp() const { return size_ / dp_; }
  int dp() const { return dp_; }
  int tag_ub() const { return tag_ub_; }
  const std::vector<int>& dp_group() const { return dp_group_; }

  MPI_Comm p2p() const { return p2p_; }
  MPI_Comm job() const { return job_; }
  MPI_Comm control() const { return control_; }
  // The communicator for a collective over `group`: this rank's dp group,
  // the whole world in rank order, or this rank alone (MPI_COMM_SELF).
  // Errors: InvalidArgument naming the group and the layout.
  absl::StatusOr<MPI_Comm> GroupComm(const Group& group) const;

  // Runs `call` with the MPI lock held and returns its status. Every MPI
  // call of the process (after MPI_Init) goes through here.
  absl::Status Locked(absl::FunctionRef<absl::Status()> call) ABSL_LOCKS_EXCLUDED(mu_);

  // OK until the job is aborted; then Aborted with the first cause ("rank 2
  // failed: <reason>"). Polls for an abort notice from another process.
  absl::Status AbortStatus() ABSL_LOCKS_EXCLUDED(mu_);
  bool aborted() ABSL_LOCKS_EXCLUDED(mu_) { return !AbortStatus().ok(); }

  // Aborts the job: this process's operations fail from now on with
  // Aborted "rank <this rank> failed: <reason>", and every other process is
  // sent a notice saying so (the first abort wins; later calls do nothing).
  void Abort(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Aborts this process only, with `message` as the cause (no notices:
  // used when the launcher is already ending the job).
  void AbortLocally(absl::string_view message) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `poll` until it returns true or an error (returned as is), or
  // `deadline` passes (returns false), sleeping per the poll policy in
  // between. `poll` runs without the lock; it takes it through Locked().
  absl::StatusOr<bool> PollUntil(absl::FunctionRef<absl::StatusOr<bool>()> poll,
                                 absl::Time deadline) const;

  // Waits for `request` (posted on one of the communicators) until it
  // completes, `deadline` passes (DeadlineExceeded "timed out after <d>
  // waiting for <what>") or, unless ignore_abort, the job aborts (Aborted;
  // the request is then left to MPI). `status` may be null.
  absl::Status Wait(MPI_Request* request, MPI_Status* status, absl::Time deadline,
                    absl::Duration timeout, absl::string_view what, bool ignore_abort);

 private:
  MpiWorld(int rank, int size, int dp, int tag_ub, PollPolicy poll);
  absl::Status CreateCommunicators();
  absl::Status PollNoticeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Const after Create().
  const int rank_;
  const int size_;
  const int dp_;
  const int tag_ub_;
  const PollPolicy poll_;
  std::vector<int> dp_group_;  // {r, r + pp, ...}, r = pipeline rank
  MPI_Comm p2p_ = MPI_COMM_NULL;
  MPI_Comm dp_comm_ = MPI_COMM_NULL;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm job_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;

  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_message_ ABSL_GUARDED_BY(mu_);
  // The receive posted for the first abort notice from any process.
  MPI_Request notice_request_ ABSL_GUARDED_BY(mu_) = MPI_REQUEST_NULL;
  char notice_[kMaxReasonBytes] ABSL_GUARDED_BY(mu_) = {};
  // The notices this process sent, and their text (valid until finalize).
  std::string sent_reason_ ABSL_GUARDED_BY(mu_);
  std::vector<MPI_Request> sent_notices_ ABSL_GUARDED_BY(mu_);
};

// The Transport over `world` (mpi_transport.cc; contract in mpi_transport.h).
// Borrows `world`, which must outlive it.
std::unique_ptr<Transport> NewMpiTransport(MpiWorld* world);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_MPI_MPI_WORLD_H_
