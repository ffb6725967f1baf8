// The in-process backend: every rank of a world is a thread of this process,
// and bytes move by real copies between the ranks' buffers (the leveldb
// NewMemEnv twin of the MPI and NCCL backends). It is jitpipe's embedded
// default: no launcher, no setup.
//
// Protocol: eager. A send whose receive is already posted copies straight
// into the receive buffer; otherwise the bytes are copied into the world's
// staging area and the send completes at once (its buffer may be reused, as
// after MPI's eager send); the receive copies them out when it is posted.
// Staged bytes are reported by InFlightBytes(). Collectives complete when
// every member has posted; the last member to post reduces, in group order,
// so results are deterministic.
//
// Thread safety: the world and all its transports may be used from any
// number of threads.
#ifndef JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_
#define JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_

#include <cstdint>
#include <memory>

#include "comm/transport.h"
#include "comm/world.h"

namespace jitpipe {

// The World (comm/world.h) in one process: every rank is local; the
// barrier counts the rank threads' arrivals; Gather and CollectAfterFailure
// hand the payloads back as they are; Abort(w, reason) is rank w's
// transport's Abort and releases the barrier with Aborted.
class InProcessWorld : public World {
 public:
  // Bytes staged for sends whose receives were not posted yet, now (and,
  // PeakInFlightBytes, at most), over the whole world.
  virtual int64_t InFlightBytes() const = 0;
};

// Creates a world of `size` ranks. REQUIRES: size >= 1.
std::unique_ptr<InProcessWorld> CreateInProcessWorld(int size);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_INPROC_INPROC_TRANSPORT_H_
