#include "comm/transport.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jitpipe {

int Group::IndexOf(int rank) const {
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<bool> Transport::StreamWait(RequestId request, void* stream) {
  (void)request;
  (void)stream;
  return absl::UnimplementedError(
      "this backend's requests complete on the host: there is no stream to wait on");
}

absl::StatusOr<RequestId> Transport::PostMarker(const OpInfo& info) {
  (void)info;
  return absl::UnimplementedError(
      "this backend computes on the host: there is no stream to mark");
}

std::string Group::ToString() const { return absl::StrCat("{", absl::StrJoin(ranks, ", "), "}"); }

std::string RankFailed(int rank, absl::string_view reason) {
  return absl::StrCat("rank ", rank, " failed: ", reason);
}

}  // namespace jitpipe
