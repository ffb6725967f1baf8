#include "comm/op_label.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

std::string OpLabel::ToString() const {
  return absl::StrCat(verb, action.empty() ? "" : " ", action, " ", relation, " ", number,
                      relation == "over" ? " ranks" : "",
                      program_index >= 0 ? absl::StrCat(" (index ", program_index, ")") : "");
}

absl::Status CheckReduceScatterSizes(int rank, const OpLabel& what, size_t input_elements,
                                     size_t output_elements, size_t members) {
  if (input_elements == output_elements * members) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "rank ", rank, ": ", what.ToString(), ": the input holds ", input_elements,
      " elements; expected ", output_elements * members, " (", output_elements, " per member)"));
}

}  // namespace jitpipe
