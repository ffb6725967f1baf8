// Text in an SVG without a layout engine: escaping, an upper bound on a
// string's drawn width, and greedy line wrapping, so that RenderSvg can keep
// every label inside its box and the title inside the page.
//
// Widths are estimated, not measured: an SVG names a font family and the
// viewer picks what it has. The estimate is Helvetica's advance widths (the
// family RenderSvg asks for, Arial being metric-compatible) scaled by 1.17
// with a floor of 0.34 em per character, which bounds DejaVu Sans too (the
// usual fallback on Linux, about 14% wider than Helvetica). Non-ASCII code
// points count as 1 em.
//
// Pure and thread-safe.
#ifndef JITPIPE_TRACES_SVG_TEXT_H_
#define JITPIPE_TRACES_SVG_TEXT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace jitpipe {

enum class FontWeight { kNormal, kBold };

// `text` with &, <, > and " replaced by XML entities: safe in element text
// and in a double-quoted attribute.
std::string EscapeXml(absl::string_view text);

// An upper bound on the width in px of `text` (UTF-8) drawn at `font_px`.
double TextWidthPx(absl::string_view text, double font_px,
                   FontWeight weight = FontWeight::kNormal);

// `text` broken into lines no wider than `max_width_px` (TextWidthPx):
// greedily at spaces, and inside a word only where the word alone is wider
// than a line (a long file path). Never returns an empty list; an empty
// text gives one empty line. REQUIRES: max_width_px > 0.
std::vector<std::string> WrapText(absl::string_view text, double font_px, double max_width_px,
                                  FontWeight weight = FontWeight::kNormal);

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_SVG_TEXT_H_
