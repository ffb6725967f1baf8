// The world: the job a replay runs in -- how many world ranks it has, which
// of them this process runs, each local rank's Transport, the collective
// groups the job asked for, and the job-level operations a driver needs
// besides the transport's traffic: a barrier, gathering results at world
// rank 0, collecting reports after a failure, and aborting. One interface,
// one driver over it (runtime/replay.h). A backend is one folder of comm/
// implementing this and transport.h, mirrored file for file (gloo's
// transport/{tcp,uv,ibverbs}), each exposing one factory:
//   comm/inproc   every rank a thread of this process: CreateInProcessWorld
//                 (inproc_world.h; the transport: inproc_transport.h)
//   comm/mpi      one rank per process of an MPI job: CreateMpiWorld
//                 (mpi_world.h; the transport: mpi_transport.h)
// and one line in the conformance suites' parameter lists
// (tests/comm/transport_conformance_test.cc,
// tests/runtime/replay_conformance_test.cc).
//
// The world knows ranks, not layouts: pipeline and data-parallel ranks are
// the driver's (runtime/replay.h), which checks the size it needs
// (CheckSize) and requests the groups its collectives use (CreateGroups).
//
// Job-level calls are made in the same order by every rank. The barrier is
// per rank (each local rank's thread calls it); CreateGroups, Gather and
// CollectAfterFailure are per process (one call; Gather and
// CollectAfterFailure with one payload per local rank, in local_ranks()
// order). Every call is bounded: DeadlineExceeded after its timeout, Aborted
// once the job has been aborted.
//
// Thread safety: every method may be called from any thread.
#ifndef JITPIPE_COMM_WORLD_H_
#define JITPIPE_COMM_WORLD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/transport.h"

namespace jitpipe {

// When a posted send completes, which decides what a program must guarantee
// to run over the backend (scheduler/analysis/validate.h).
enum class SendCompletion {
  kEager,       // when posted: the bytes are copied out (in-process)
  kRendezvous,  // possibly only once its receive is posted (MPI, large messages)
};

// How a backend matches the point-to-point transfers between two ranks,
// which decides which programs it can run (runtime/replay_plan.h,
// CheckProgramOrder): by tag, in any order (in-process, MPI, one-GPU
// CUDA: relaxed semantics); in posting order per directed pair of ranks,
// one FIFO each (nccl-lazy: relaxed semantics plus the per-pair order);
// in posting order through one FIFO per rank (nccl: strict semantics).
enum class P2pOrdering { kByTag, kFifoPerEdge, kFifoPerRank };

class World {
 public:
  virtual ~World() = default;

  // The backend, as messages name it: "MPI", "in-process".
  virtual std::string name() const = 0;
  virtual int size() const = 0;
  // The world ranks this process runs, ascending.
  virtual const std::vector<int>& local_ranks() const = 0;
  bool is_local(int world_rank) const;
  // Whether this process runs world rank 0, which receives what Gather and
  // CollectAfterFailure hand over.
  bool is_root() const { return is_local(0); }

  // OK when the world has `needed` ranks; otherwise InvalidArgument saying
  // what `needed_by` needs and how to get it: "the world has 6 ranks but pp
  // 4 x dp 2 needs 8" (needed_by "pp 4 x dp 2"); MPI: "the MPI world has 6
  // processes but pp 4 x dp 2 needs 8 (mpirun -np 8)".
  virtual absl::Status CheckSize(int needed, absl::string_view needed_by) const;

  // Requests the groups this process's ranks will post collectives over
  // (Transport::PostAllReduce, PostReduceScatter). Every process calls it
  // with the same list in the same order, before the first collective over
  // any of them; it may be called again to add groups (a group already
  // requested is kept as it is). The whole world {0, ..., size - 1} and a
  // rank alone {r} need no request. MPI creates one communicator per group
  // of which this process has a rank; in process the groups are recorded.
  // Errors: InvalidArgument naming a group that is empty, holds a rank
  // twice or a rank outside the world, or (MPI) when the processes asked
  // for different lists; DeadlineExceeded when another process has not
  // joined within `timeout`; Aborted once the job is.
  virtual absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) = 0;

  // Local rank w's endpoint; owned by the world, valid while it lives.
  // REQUIRES: is_local(w).
  virtual Transport& transport(int world_rank) = 0;
  virtual SendCompletion send_completion() const = 0;
  virtual P2pOrdering p2p_ordering() const { return P2pOrdering::kByTag; }

  // Backends with a watchdog (comm/cuda, comm/nccl, comm/watchdog.h): starts
  // it for this process's ranks. An operation of local rank w pending
  // longer than `timeout` makes the watchdog call handler(w, status) once,
  // on its own thread, with DeadlineExceeded naming the operation, and then
  // abort the job as Abort(w, status.message()) does (ncclCommAbort), so
  // that a rank whose thread is stuck behind the device still ends; the
  // handler takes the flight records before that. Host backends have no
  // watchdog (their drivers' waits carry the timeout): nothing happens.
  // Call it at most once, before the first step.
  using TimeoutHandler = std::function<void(int world_rank, const absl::Status& status)>;
  virtual void StartWatchdog(absl::Duration timeout, TimeoutHandler handler) {
    (void)timeout;
    (void)handler;
  }

  // Local rank w's part of a barrier of every world rank: OK once all have
  // arrived; DeadlineExceeded ("timed out after 2s waiting at the step
  // barrier ...") when `timeout` passes first, in which case w still counts
  // as arrived (the others' part of this barrier completes it); Aborted
  // "rank <r> failed: <reason>" once the job is.
  virtual absl::Status Barrier(int world_rank, absl::Duration timeout) = 0;

  // This process's payloads, one per local rank. At the root: every rank's
  // payload, by world rank. Elsewhere: an empty vector once rank 0 has them.
  // Errors: InvalidArgument when `local` does not hold one payload per
  // local rank; DeadlineExceeded; Aborted.
  virtual absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                          absl::Duration timeout) = 0;

  // After a failure (the job aborted or about to end): hands the payloads
  // to rank 0 even though the job is aborted. At the root: every rank's
  // payload by world rank, nullopt for those that did not arrive within
  // `grace`; elsewhere an empty vector once rank 0 has taken them or the
  // grace has passed. At most once per process.
  virtual std::vector<std::optional<std::string>> CollectAfterFailure(
      absl::Span<const std::string> local, absl::Duration grace) = 0;

  // Aborts the job on behalf of local rank w: every pending and later
  // operation of every rank fails with Aborted "rank <w> failed: <reason>"
  // (as far as the backend reaches), barriers included; the same as rank
  // w's transport's Abort(reason). The first abort wins; later calls do
  // nothing.
  virtual void Abort(int world_rank, const std::string& reason) = 0;
  // Whether the job has been aborted (here or, as far as this process can
  // tell, anywhere).
  virtual bool aborted() = 0;

  // Keeps `object` alive as long as the backend may still write into it:
  // after a failure, the buffers of operations it cannot cancel.
  virtual void RetainUntilEnd(std::shared_ptr<const void> object) = 0;
  // This process is about to end without its destructors, because a local
  // rank is stuck in a stage call (its thread holds the run's objects):
  // leave the job in order now, so that the other processes' orderly end
  // does not wait for this one. MPI: MPI_Finalize (MPI_Abort if this
  // process's failure report did not reach rank 0); in process: nothing.
  // REQUIRES: called from the thread that created the world, and the
  // process makes no transport call afterwards (it exits).
  virtual void LeaveBeforeExit() = 0;

  // Bytes the backend staged for sends whose receives were not posted yet,
  // at most, over this process's ranks (0 when the backend does not stage).
  virtual int64_t PeakInFlightBytes() const = 0;
};

// For backends: the rules every world applies to groups, so that all say
// the same.
//
// OK when every group is non-empty and holds distinct ranks of [0, size);
// otherwise InvalidArgument naming the first that does not ("group {0, 0}
// holds rank 0 twice").
absl::Status CheckGroups(absl::Span<const Group> groups, int size);
// Whether a collective over `group` needs no request: the whole world in
// rank order, or one rank alone.
bool IsImplicitGroup(const Group& group, int size);
// The error of a collective posted by `rank` over `group` when the rank is
// not a member, or the group was neither requested nor implicit.
absl::Status NotAMemberError(int rank, const Group& group);
absl::Status NotRequestedError(int rank, const Group& group);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_WORLD_H_
