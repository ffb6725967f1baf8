// The in-process backend's World (comm/world.h): every rank of the job is a
// thread of this process, over one fabric and one Transport per rank
// (inproc_transport.h). It is jitpipe's embedded default: no launcher, no
// setup. Mirrors comm/mpi/mpi_world.h.
//
// Every rank is local. CreateGroups records the groups (every call is
// this process's, so the lists cannot differ); the barrier counts the rank
// threads' arrivals; Gather and CollectAfterFailure hand the payloads back
// as they are; Abort(w, reason) is rank w's transport's Abort, and either
// releases the barrier with Aborted. Sends complete eagerly
// (SendCompletion::kEager).
//
// Thread safety: the world and all its transports may be used from any
// number of threads.
#ifndef JITPIPE_COMM_INPROC_INPROC_WORLD_H_
#define JITPIPE_COMM_INPROC_INPROC_WORLD_H_

#include <cstdint>
#include <memory>

#include "comm/transport.h"
#include "comm/world.h"

namespace jitpipe {

class InProcessWorld : public World {
 public:
  // Bytes staged for sends whose receives were not posted yet, now (and,
  // PeakInFlightBytes, at most), over the whole world.
  virtual int64_t InFlightBytes() const = 0;
};

// Creates a world of `size` ranks, all of them local. REQUIRES: size >= 1.
std::unique_ptr<InProcessWorld> CreateInProcessWorld(int size);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_INPROC_INPROC_WORLD_H_
