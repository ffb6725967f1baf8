#include "stages/exec/stage.h"

#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

std::string Layout(size_t count, absl::Span<const int64_t> bytes) {
  return absl::StrCat(count, count == 1 ? " segment (" : " segments (",
                      absl::StrJoin(bytes, ", "), " bytes)");
}

}  // namespace

int64_t StashView::bytes() const {
  int64_t sum = 0;
  for (size_t i = 0; i < count(); ++i) sum += static_cast<int64_t>(segment(i).size());
  return sum;
}

absl::StatusOr<StashSegments> SplitStash(StashView stash, absl::Span<const int64_t> expected,
                                         absl::string_view who) {
  StashSegments out;
  bool fits = stash.count() == expected.size();
  for (size_t i = 0; fits && i < expected.size(); ++i) {
    fits = static_cast<int64_t>(stash.segment(i).size()) == expected[i];
  }
  if (fits) {
    for (size_t i = 0; i < expected.size(); ++i) out.push_back(stash.segment(i));
    return out;
  }
  const int64_t total = std::accumulate(expected.begin(), expected.end(), int64_t{0});
  if (stash.count() == 1 && static_cast<int64_t>(stash.segment(0).size()) == total) {
    MutableBytes whole = stash.segment(0);
    for (int64_t bytes : expected) {
      out.push_back(whole.subspan(0, static_cast<size_t>(bytes)));
      whole.remove_prefix(static_cast<size_t>(bytes));
    }
    return out;
  }
  std::vector<int64_t> given;
  for (size_t i = 0; i < stash.count(); ++i) {
    given.push_back(static_cast<int64_t>(stash.segment(i).size()));
  }
  return absl::InvalidArgumentError(absl::StrCat(who, ": the stash has ",
                                                 Layout(stash.count(), given), "; expected ",
                                                 Layout(expected.size(), expected), " or one of ",
                                                 total));
}

absl::Status Stage::Backward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                             ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                             MutableBytes param_grad) {
  RETURN_IF_ERROR(BackwardInput(ctx, microbatch, output_grad, stash, input_grad));
  return BackwardWeight(ctx, microbatch, input, output_grad, stash, param_grad);
}

}  // namespace jitpipe
