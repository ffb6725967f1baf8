// Reading the zero-bubble and DualPipe anchors
// (tests/testdata/conformance/anchors/{zbpp,deepseek}_*.json) and golden
// orders (tests/testdata/zero_bubble/) in our IR vocabulary, for the
// zero-bubble family's tests.
#ifndef JITPIPE_TESTS_SCHEDULER_GENERATORS_ZERO_BUBBLE_ANCHORS_H_
#define JITPIPE_TESTS_SCHEDULER_GENERATORS_ZERO_BUBBLE_ANCHORS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace jitpipe::testing {

// One anchor action on rank `rank` of a `pp`-rank anchor, as our action text:
// F -> F, B (input gradient) -> I, W -> W, BW (full backward) -> B; no chunk
// or chunk 0 -> stage `rank`, chunk 1 -> stage 2*pp-1-rank (the V and DualPipe
// conventions); "X&Y" -> "(X;Y)OVERLAP_F_B". Fails the test on text it cannot
// read. Example: AnchorActionText("F3c0&BW1c1", 0, 4) == "(0F3;7B1)OVERLAP_F_B".
std::string AnchorActionText(absl::string_view anchor, int rank, int pp);

// The anchor file's "ranks", converted action by action.
std::vector<std::vector<std::string>> AnchorProgramText(const nlohmann::json& anchor);

// A golden order file under tests/testdata (tests/testdata/zero_bubble/*.txt:
// one line per rank, actions in our text form separated by spaces).
std::vector<std::vector<std::string>> ReadOrderText(const std::string& relative);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_SCHEDULER_GENERATORS_ZERO_BUBBLE_ANCHORS_H_
