#include "comm/backend_traits.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

const std::vector<BackendTraits>& AllBackendTraits() {
  static const std::vector<BackendTraits>* all = new std::vector<BackendTraits>{
      {"inproc", false, false, P2pOrdering::kByTag, SendCompletion::kEager},
      {"mpi", false, true, P2pOrdering::kByTag, SendCompletion::kRendezvous},
      {"cuda", true, false, P2pOrdering::kByTag, SendCompletion::kEager},
      {"nccl", true, true, P2pOrdering::kFifoPerRank, SendCompletion::kRendezvous},
      {"nccl-lazy", true, true, P2pOrdering::kFifoPerEdge, SendCompletion::kRendezvous},
  };
  return *all;
}

absl::StatusOr<BackendTraits> BackendTraitsOf(absl::string_view name) {
  for (const BackendTraits& traits : AllBackendTraits()) {
    if (traits.name == name) return traits;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--backend must be inproc, mpi, cuda, nccl or nccl-lazy, not \"", name, "\""));
}

}  // namespace jitpipe
