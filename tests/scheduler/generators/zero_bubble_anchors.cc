#include "tests/scheduler/generators/zero_bubble_anchors.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe::testing {
namespace {

// "T<mb>[c<chunk>]" with T in BW, F, B, W.
std::string SimpleActionText(absl::string_view text, int rank, int pp) {
  const std::string original(text);
  std::string kind;
  if (absl::ConsumePrefix(&text, "BW")) {
    kind = "B";
  } else if (absl::ConsumePrefix(&text, "F")) {
    kind = "F";
  } else if (absl::ConsumePrefix(&text, "B")) {
    kind = "I";
  } else if (absl::ConsumePrefix(&text, "W")) {
    kind = "W";
  } else {
    ADD_FAILURE() << "unknown anchor action " << original;
    return "";
  }
  std::vector<absl::string_view> parts = absl::StrSplit(text, 'c');
  int mb = 0;
  int chunk = 0;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &mb) ||
      (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &chunk)) || chunk < 0 || chunk > 1) {
    ADD_FAILURE() << "unreadable anchor action " << original;
    return "";
  }
  const int stage = chunk == 0 ? rank : 2 * pp - 1 - rank;
  return absl::StrCat(stage, kind, mb);
}

}  // namespace

std::string AnchorActionText(absl::string_view anchor, int rank, int pp) {
  std::vector<absl::string_view> parts = absl::StrSplit(anchor, '&');
  if (parts.size() == 1) return SimpleActionText(anchor, rank, pp);
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ";", SimpleActionText(parts[i], rank, pp));
  }
  return absl::StrCat(out, ")OVERLAP_F_B");
}

std::vector<std::vector<std::string>> AnchorProgramText(const nlohmann::json& anchor) {
  const int pp = anchor["params"]["pp"].get<int>();
  std::vector<std::vector<std::string>> out;
  for (const auto& list : anchor["ranks"]) {
    const int rank = static_cast<int>(out.size());
    std::vector<std::string> row;
    for (const auto& item : list) row.push_back(AnchorActionText(item.get<std::string>(), rank, pp));
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::vector<std::string>> ReadOrderText(const std::string& relative) {
  std::vector<std::vector<std::string>> out;
  for (absl::string_view line : absl::StrSplit(ReadTestdata(relative), '\n', absl::SkipEmpty())) {
    out.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return out;
}

}  // namespace jitpipe::testing
