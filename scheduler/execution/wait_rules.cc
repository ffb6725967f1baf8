#include "scheduler/execution/wait_rules.h"

namespace jitpipe {

absl::string_view WaitModelName(WaitModel model) {
  switch (model) {
    case WaitModel::kRelaxed:
      return "relaxed semantics";
    case WaitModel::kStrict:
      return "strict rendezvous semantics";
    case WaitModel::kBlockingRecv:
      return "blocking-receive semantics";
  }
  return "?";
}

}  // namespace jitpipe
