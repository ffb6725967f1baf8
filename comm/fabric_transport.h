// A rank's Transport over a fabric shared by every rank of a process (the
// in-process fabric, comm/inproc; the one-GPU fabric, comm/cuda): each call
// forwards to the fabric with the rank it was made for. A backend whose
// fabric does more (device streams, markers) derives from it and adds those
// overrides.
//
// Fabric must provide, for rank `self`:
//   Send(self, peer, tag, bytes, info), Recv(self, peer, tag, bytes, info),
//   PostCollective(self, group, reduce_scatter, input, output, op, info)
//     -> absl::StatusOr<RequestId>
//   Test(id) -> absl::StatusOr<bool>; Wait(id, timeout) -> absl::Status
//   Abort(self, reason); size(); InFlightBytes(); PeakInFlightBytes()
// and outlive every transport made over it.
#ifndef JITPIPE_COMM_FABRIC_TRANSPORT_H_
#define JITPIPE_COMM_FABRIC_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/transport.h"

namespace jitpipe {

template <typename Fabric>
class FabricTransport : public Transport {
 public:
  FabricTransport(Fabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}
  FabricTransport(const FabricTransport&) = delete;
  FabricTransport& operator=(const FabricTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override {
    return fabric_->Send(rank_, peer, tag, bytes, info);
  }
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override {
    return fabric_->Recv(rank_, peer, tag, bytes, info);
  }
  absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data, ReduceOp op,
                                          const OpInfo& info) override {
    return fabric_->PostCollective(rank_, group, /*reduce_scatter=*/false, data, data, op, info);
  }
  absl::StatusOr<RequestId> PostReduceScatter(const Group& group, absl::Span<const float> input,
                                              absl::Span<float> output, ReduceOp op,
                                              const OpInfo& info) override {
    return fabric_->PostCollective(rank_, group, /*reduce_scatter=*/true, input, output, op, info);
  }
  absl::StatusOr<bool> Test(RequestId request) override { return fabric_->Test(request); }
  absl::Status Wait(RequestId request, absl::Duration timeout) override {
    return fabric_->Wait(request, timeout);
  }
  void Abort(const std::string& reason) override { fabric_->Abort(rank_, reason); }
  int64_t InFlightBytes() const override { return fabric_->InFlightBytes(); }
  int64_t PeakInFlightBytes() const override { return fabric_->PeakInFlightBytes(); }

 protected:
  Fabric* fabric() const { return fabric_; }

 private:
  Fabric* const fabric_;
  const int rank_;
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_FABRIC_TRANSPORT_H_
