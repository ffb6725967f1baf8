#include "traces/svg_text.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace jitpipe {
namespace {

// Helvetica's advance widths in 1/1000 em for the printable ASCII
// characters ' ' (32) to '~' (126), from its Adobe font metrics.
constexpr int kHelvetica[95] = {
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,  // ' ' to /
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,  // 0 to ?
    1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,  // @ to O
    667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,  // P to _
    333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,  // ` to o
    556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584};      // p to ~

constexpr double kScale = 1.17;       // Helvetica -> an upper bound for DejaVu Sans
constexpr double kFloorEm = 0.34;     // DejaVu's narrowest glyphs are wider than Helvetica's
constexpr double kBoldScale = 1.10;   // bold faces are at most this much wider
constexpr double kOtherEm = 1.0;      // a non-ASCII code point

double CharEm(unsigned char c) {
  if (c >= 32 && c <= 126) return std::max(kHelvetica[c - 32] / 1000.0 * kScale, kFloorEm);
  if ((c & 0xC0) == 0x80) return 0;  // a UTF-8 continuation byte: counted with its lead
  return kOtherEm;
}

// Splits `word` into pieces no wider than `max_width_px`, each at least one
// character (a UTF-8 sequence is never cut).
void BreakWord(absl::string_view word, double font_px, double max_width_px, FontWeight weight,
               std::vector<std::string>& lines) {
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    size_t n = 1;
    while (i + n < word.size() && (static_cast<unsigned char>(word[i + n]) & 0xC0) == 0x80) ++n;
    const absl::string_view ch = word.substr(i, n);
    if (!piece.empty() &&
        TextWidthPx(absl::StrCat(piece, ch), font_px, weight) > max_width_px) {
      lines.push_back(std::move(piece));
      piece.clear();
    }
    piece.append(ch.data(), ch.size());
    i += n;
  }
  lines.push_back(std::move(piece));
}

}  // namespace

std::string EscapeXml(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

double TextWidthPx(absl::string_view text, double font_px, FontWeight weight) {
  double em = 0;
  for (char c : text) em += CharEm(static_cast<unsigned char>(c));
  return em * font_px * (weight == FontWeight::kBold ? kBoldScale : 1.0);
}

std::vector<std::string> WrapText(absl::string_view text, double font_px, double max_width_px,
                                  FontWeight weight) {
  std::vector<std::string> lines;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const std::string joined = line.empty() ? std::string(word) : absl::StrCat(line, " ", word);
    if (TextWidthPx(joined, font_px, weight) <= max_width_px) {
      line = joined;
      continue;
    }
    if (!line.empty()) lines.push_back(std::move(line));
    line.clear();
    if (TextWidthPx(word, font_px, weight) <= max_width_px) {
      line = std::string(word);
      continue;
    }
    BreakWord(word, font_px, max_width_px, weight, lines);
    line = std::move(lines.back());  // the word's last piece may take more words
    lines.pop_back();
  }
  lines.push_back(std::move(line));
  return lines;
}

}  // namespace jitpipe
