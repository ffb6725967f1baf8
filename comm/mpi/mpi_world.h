// The MPI backend's World (comm/world.h): one rank per process, launched by
// mpirun on one or many machines (Open MPI 4.1). CreateMpiWorld() starts MPI
// and returns the process's world, which owns MPI until it is destroyed and
// holds the rank's Transport (mpi_transport.h). Mirrors
// comm/inproc/inproc_world.h. This header does not include mpi.h (STYLE.md,
// house style 9); nothing outside comm/mpi does.
//
// The world knows ranks, not layouts. The replay driver (runtime/replay.h)
// runs pp x dp processes, world rank = replica * pp + pipeline rank, and
// requests each pipeline rank's data-parallel group {r, r + pp, ...,
// r + (dp - 1) pp} (CreateGroups: one communicator per group, the group
// index its rank). `mpirun --map-by slot` fills the hosts of a hostfile in
// rank order, so with `a slots=4` and `b slots=4` each replica's pipeline
// runs on one host and only the gradient reductions cross hosts
// (`--map-by node` would put pipeline neighbours on different hosts
// instead). Nothing assumes one host.
//
// The World, on MPI: one local rank, rank(). CreateGroups first checks,
// bounded by its timeout, that every process asks for the same list (an
// MPI_Iallgather of the list's fingerprint on the job's own communicator:
// InvalidArgument "rank 3 requested other groups than rank 0" on every
// process otherwise), then splits MPI_COMM_WORLD once per new group. The
// barrier, gather and failure collection are the one-rank calls below;
// Abort(w, reason) is the transport's Abort; sends complete by rendezvous
// (SendCompletion::kRendezvous). With abort_on_sigterm, SIGTERM (what
// mpirun sends to every process once one has died or exited non-zero, a
// second before SIGKILL) aborts the process's part of the job as well, so a
// rank blocked in a wait fails with a clear error and can still write its
// flight record.
//
// Ending a job:
//   success: every process destroys its world: MPI_Finalize.
//   failure: every process writes its flight record, calls
//     CollectAfterFailure (each hands a payload, e.g. that record, to rank
//     0, bounded by a grace period) and destroys its world: MPI_Finalize
//     when its part of that exchange completed (rank 0: every payload
//     arrived; the others: rank 0 took theirs), else MPI_Abort(1), because a
//     dead process can then be reached only by the launcher.
//   a rank stuck in a stage call: its process takes part in that exchange
//     too, then ends MPI from its main thread (LeaveBeforeExit: the stuck
//     thread makes no MPI call) and exits, so the job still ends in order.
//
// The record channel (comm/record_channel.h): at creation rank 0 listens
// on a TCP port and broadcasts where; every other process connects (best
// effort, at most 10 s; a rank that cannot stays on MPI alone). After a
// failure rank 0 first sends every rank a failure notice over it -- which
// aborts that rank's part as SIGTERM does -- and the payloads travel over
// it rather than over MPI. mpirun signals the hosts one after another, so a
// rank on another host that waits on a dead peer would otherwise hear of
// the failure only once rank 0 has gone, and its record would be lost
// (tests/mpi/mpi_netns_test.cc, SurvivorsRecordsReachRankZero).
//
// Thread safety: the world and its transport may be used from any thread.
#ifndef JITPIPE_COMM_MPI_MPI_WORLD_H_
#define JITPIPE_COMM_MPI_MPI_WORLD_H_

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
  // A waiting thread yields between its first spin_polls polls, then sleeps
  // poll_sleep between polls (oversubscribed ranks must not busy-spin).
  int spin_polls = 64;
  absl::Duration poll_sleep = absl::Microseconds(50);
  // Turn SIGTERM into an abort of this process's part of the job (see
  // above). The signal is blocked in every thread and taken by a watcher
  // thread with sigwait, so CreateMpiWorld must run before the process
  // starts other threads.
  bool abort_on_sigterm = true;
};

class MpiWorld : public World {
 public:
  // Ends MPI (see "Ending a job"). REQUIRES: nothing uses the transport.
  ~MpiWorld() override = default;

  using World::Barrier;
  using World::CollectAfterFailure;
  using World::Gather;
  using World::transport;

  virtual int rank() const = 0;  // world rank
  // The host this process runs on (MPI_Get_processor_name).
  virtual const std::string& host() const = 0;

  // The rank's transport; owned by the world, valid while it lives.
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

// The backend's factory. Starts MPI (MPI_Init_thread asking for
// MPI_THREAD_SERIALIZED) and sets up this process's share of the job, whose
// size is the launcher's. `argc`/`argv` are passed to MPI (may be null).
// Call it once per process; the world owns MPI until destroyed.
// Errors: Unavailable when this build has no MPI backend (Open MPI was not
// found when it was configured); InvalidArgument when the options are out
// of range; FailedPrecondition when MPI was already initialised or provides
// less than MPI_THREAD_SERIALIZED; an MPI call's status otherwise (MPI is
// finalised again before an error is returned).
absl::StatusOr<std::unique_ptr<MpiWorld>> CreateMpiWorld(int* argc, char*** argv,
                                                         const MpiOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_MPI_MPI_WORLD_H_
