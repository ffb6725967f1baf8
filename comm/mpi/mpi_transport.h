// The MPI backend: one process per rank, launched by mpirun on one or many
// machines (Open MPI 4.1). InitMpi() starts MPI and returns the process's
// MpiContext, which owns MPI until it is destroyed, knows the world's
// pp x dp layout and holds the rank's Transport. This header does not
// include mpi.h (STYLE.md, house style 9); nothing outside comm/ does.
//
// Layout (the replay driver's, runtime/replay.h): a world of
// pp x dp processes,
//   world rank = replica * pp + pipeline rank
//     pp 4, dp 2:  replica 0 -> world ranks 0 1 2 3   (pipeline ranks 0..3)
//                  replica 1 -> world ranks 4 5 6 7
// and pipeline rank r's data-parallel group is {r, r + pp, ..., r + (dp-1) pp},
// one communicator (MPI_Comm_split, color r, key replica: the group index is
// the replica). `mpirun --map-by slot` fills the hosts of a hostfile in rank
// order, so with `a slots=4` and `b slots=4` each replica's pipeline runs on
// one host and only the gradient reductions cross hosts (`--map-by node`
// would put pipeline neighbours on different hosts instead). Nothing
// assumes one host.
//
// The Transport (comm/transport.h), on MPI:
// - Point-to-point: MPI_Isend / MPI_Irecv of bytes on a communicator of their
//   own. Matching is MPI's: by (source, tag), and in posting order among
//   equal tags (MPI's non-overtaking rule), which is the interface's rule.
// - Tags: our tag is the MPI tag. A tag above the world's MPI_TAG_UB (Open
//   MPI: 2^31 - 1; at least 32767 in any MPI) is refused with
//   InvalidArgument, never folded: two operations in flight folded onto one
//   MPI tag would be paired by posting order and could swap payloads
//   silently. The runtime's tags (stages/exec/rank_executable.h, TransferTag:
//   2 (stage m + microbatch) + direction) stay below 2 S m: 2^20 for
//   pp128 x v4 x m1024.
// - Completion: a send is complete when its MPI_Isend is, i.e. when its
//   buffer may be reused. Open MPI sends small messages eagerly (complete at
//   once) and large ones by rendezvous (complete once the receive is posted
//   and the bytes have moved). What it buffers is its own: InFlightBytes()
//   is 0.
// - Sizes: a receive whose matching send has a different size fails with
//   InvalidArgument naming the operation. Counts are MPI ints: a message of
//   more than INT_MAX bytes (elements, for collectives) is InvalidArgument.
// - Collectives: MPI_Iallreduce (in place) and MPI_Ireduce_scatter_block of
//   floats over the group's communicator: the rank's data-parallel group,
//   the whole world {0, ..., size - 1}, or the rank alone; any other group
//   is InvalidArgument. kAverage divides the sum on completion. MPI chooses
//   the summation order: the result is deterministic for a world but may
//   round differently from the in-process backend's with more than two
//   members. A reduce-scatter whose output lies inside its input (the
//   reduction worker reduces a buffer in place) receives into a staging
//   copy, as MPI forbids overlapping buffers. Members must post equal
//   element counts; a mismatch is undefined in MPI (an error or a timeout).
// - Progress: Open MPI 4.1 has no asynchronous progress thread (ompi_info:
//   "OMPI progress: no"); operations move only inside MPI calls. Test() is
//   one MPI_Test; Wait() polls Test (yielding, then sleeping between polls)
//   until completion, the timeout (DeadlineExceeded naming the operation,
//   which stays pending) or an abort. A rank's reduction thread, waiting for
//   its collective, keeps the collective and the rank's sends moving while
//   the compute thread computes: that is how reductions overlap compute.
// - Threads: every MPI call is made under one mutex, never held while a
//   thread sleeps or computes, so MPI_THREAD_SERIALIZED is enough (Open MPI
//   4.1 offers MPI_THREAD_MULTIPLE too; the lock keeps us portable).
// - Abort(reason) sends a notice to every other process on a control
//   communicator; every process looks for notices in each transport call,
//   and from then on all its pending and later operations fail with Aborted
//   "rank R failed: <reason>"; an operation that had completed is still
//   reported complete. Abort() also retires the process's own pending
//   operations: receives are cancelled (waiting at most 1 s for MPI to let
//   go of their buffers), sends are freed (Open MPI cannot cancel a send; it
//   completes in the background), collectives are left to MPI, which can
//   neither cancel nor free them: their buffers must outlive MPI
//   (RetainUntilEnd). With abort_on_sigterm, SIGTERM (what mpirun
//   sends to every process once one has died or exited non-zero, a second
//   before SIGKILL) aborts the process's transport as well, so a rank
//   blocked in a wait fails with a clear error and can still write its
//   flight record. Each kind of traffic has its own communicator, so none
//   can match another's.
//
// Ending a job:
//   success: every process destroys its context: MPI_Finalize.
//   failure: every process writes its flight record, calls
//     CollectAfterFailure (each hands a payload, e.g. that record, to rank
//     0, bounded by a grace period) and destroys its context: MPI_Finalize
//     when its part of that exchange completed (rank 0: every payload
//     arrived; the others: rank 0 took theirs), else MPI_Abort(1), because a
//     dead process can then be reached only by the launcher.
//   a rank stuck in a stage call: its process takes part in that exchange
//     too, then ends MPI from its main thread (LeaveBeforeExit: the stuck
//     thread makes no MPI call) and exits, so the job still ends in order.
//
// Thread safety: the context and its transport may be used from any thread.
#ifndef JITPIPE_COMM_MPI_MPI_TRANSPORT_H_
#define JITPIPE_COMM_MPI_MPI_TRANSPORT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/transport.h"
#include "comm/world.h"

namespace jitpipe {

struct MpiOptions {
  // Data-parallel replicas; it must divide the world size (pp = size / dp).
  int dp = 1;
  // A waiting thread yields between its first spin_polls polls, then sleeps
  // poll_sleep between polls (oversubscribed ranks must not busy-spin).
  int spin_polls = 64;
  absl::Duration poll_sleep = absl::Microseconds(50);
  // Turn SIGTERM into an abort of this process's transport (see above). The
  // signal is blocked in every thread and taken by a watcher thread with
  // sigwait, so InitMpi must run before the process starts other threads.
  bool abort_on_sigterm = true;
};

// The context is the job's World (comm/world.h) in this process: one local
// rank, rank(); the World's barrier, gather and failure collection are the
// one-rank calls below; Abort(w, reason) is the transport's Abort; sends
// complete by rendezvous (SendCompletion::kRendezvous).
class MpiContext : public World {
 public:
  // Ends MPI (see "Ending a job"). REQUIRES: nothing uses the transport.
  ~MpiContext() override = default;

  using World::Barrier;
  using World::CollectAfterFailure;
  using World::Gather;
  using World::transport;

  virtual int rank() const = 0;  // world rank
  virtual int pp() const = 0;
  virtual int dp() const = 0;
  int replica() const { return rank() / pp(); }
  int pipeline_rank() const { return rank() % pp(); }
  // The host this process runs on (MPI_Get_processor_name).
  virtual const std::string& host() const = 0;

  // The rank's transport; owned by the context, valid while it lives.
  virtual Transport& transport() = 0;

  // Keeps `object` alive until MPI has ended (finalised or aborted). After a
  // failure MPI may still write into the buffers of operations it cannot
  // cancel (a nonblocking collective); a caller hands them over here
  // instead of freeing them.
  void RetainUntilEnd(std::shared_ptr<const void> object) override = 0;

  // Job-level collectives on a communicator of their own, for setup and
  // results. Every process calls them in the same order. Each is bounded:
  // DeadlineExceeded after `timeout`, Aborted once the job is aborted.
  virtual absl::Status Barrier(absl::Duration timeout) = 0;
  // Rank 0's `bytes` replace everyone else's.
  virtual absl::Status Broadcast(std::string* bytes, absl::Duration timeout) = 0;
  // At rank 0: every rank's `bytes`, by rank. Elsewhere: an empty vector.
  virtual absl::StatusOr<std::vector<std::string>> Gather(absl::string_view bytes,
                                                          absl::Duration timeout) = 0;

  // After a failure (the job is aborted or about to end): hands `payload`
  // to rank 0, even once the job is aborted. At rank 0 returns every rank's
  // payload by rank (its own included), nullopt for those that did not
  // arrive within `grace`; elsewhere returns an empty vector once rank 0 has
  // taken the payload or `grace` has passed. After a SIGTERM the grace is at
  // most 0.5 s: mpirun sends SIGKILL a second later. Call it at most once.
  virtual std::vector<std::optional<std::string>> CollectAfterFailure(absl::string_view payload,
                                                                      absl::Duration grace) = 0;

  // Whether this process's part of the job is aborted: by a failure here, a
  // notice from another process, or SIGTERM (polls for notices). Any thread.
  bool aborted() override = 0;
  // Ends MPI now (see World): the destructor then makes no MPI call. A
  // stuck process finalises like the others rather than have the job ended
  // by MPI_Abort: mpirun 4.1 deadlocks or crashes in PMIx_server_finalize
  // about one job in four when an abort races with the other processes'
  // exits (tests/mpi/mpi_jobs_test.cc, MpiStuckStageJobTest).
  void LeaveBeforeExit() override = 0;
};

// Starts MPI (MPI_Init_thread asking for MPI_THREAD_SERIALIZED) and sets up
// the world for `options`. `argc`/`argv` are passed to MPI (may be null).
// Call it once per process; the context owns MPI until destroyed.
// Errors: InvalidArgument when options.dp does not divide the world size or
// the options are out of range; FailedPrecondition when MPI was already
// initialised or provides less than MPI_THREAD_SERIALIZED; an MPI call's
// status otherwise (MPI is finalised again before an error is returned).
absl::StatusOr<std::unique_ptr<MpiContext>> InitMpi(int* argc, char*** argv,
                                                    const MpiOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_MPI_MPI_TRANSPORT_H_
