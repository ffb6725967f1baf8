// The MPI backend's Transport (comm/transport.h): one rank per process,
// launched by mpirun on one or many machines (Open MPI 4.1). The world
// (mpi_world.h) owns it. Mirrors comm/inproc/inproc_transport.h.
//
// Internal to comm/mpi: the world is the backend's one entry point. This
// header does not include mpi.h.
//
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
//   InvalidArgument naming the operation ("... expects 8 bytes but the
//   matching send has 4"; a smaller receive: "... but the matching send has
//   more: MPI_Test: MPI_ERR_TRUNCATE ..."). Counts are MPI ints: a message
//   of more than INT_MAX bytes (elements, for collectives) is
//   InvalidArgument.
// - Collectives: MPI_Iallreduce (in place) and MPI_Ireduce_scatter_block of
//   floats over the group's communicator (mpi_job.h: a requested group's,
//   the whole world's, or MPI_COMM_SELF for the rank alone); any other
//   group is InvalidArgument. kAverage divides the sum on completion. MPI
//   chooses the summation order: the result is deterministic for a world
//   but may round differently from the in-process backend's with more than
//   two members. A reduce-scatter whose output lies inside its input (the
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
// - Threads: every MPI call is made under one mutex (the job's), never held
//   while a thread sleeps or computes, so MPI_THREAD_SERIALIZED is enough.
// - Abort(reason) sends a notice to every other process on a control
//   communicator; every process looks for notices in each transport call,
//   and from then on all its pending and later operations fail with Aborted
//   "rank R failed: <reason>"; an operation that had completed is still
//   reported complete. Abort() also retires the process's own pending
//   operations: receives are cancelled (waiting at most 1 s for MPI to let
//   go of their buffers), sends are freed (Open MPI cannot cancel a send; it
//   completes in the background), collectives are left to MPI, which can
//   neither cancel nor free them: their buffers must outlive MPI
//   (World::RetainUntilEnd). Each kind of traffic has its own
//   communicator, so none can match another's.
//
// Thread safety: the transport may be used from any thread.
#ifndef JITPIPE_COMM_MPI_MPI_TRANSPORT_H_
#define JITPIPE_COMM_MPI_MPI_TRANSPORT_H_

#include <memory>

#include "comm/transport.h"

namespace jitpipe {

class MpiJob;  // mpi_job.h

// This process's rank's Transport over `job`, which must outlive it.
std::unique_ptr<Transport> NewMpiTransport(MpiJob* job);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_MPI_MPI_TRANSPORT_H_
