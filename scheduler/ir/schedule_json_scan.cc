#include "scheduler/ir/schedule_json_scan.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "scheduler/ir/action.h"

namespace jitpipe {
namespace {

// A cursor over the document. Every method returns false when the text is
// not of the shape the fast path takes (schedule_json_scan.h); the caller
// then gives up.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool AtEnd() const { return p_ == end_; }

  // JSON whitespace: space, tab, line feed, carriage return.
  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Consume(char c) {
    SkipSpace();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  // Peeks at the next non-space byte; '\0' at the end.
  char Next() {
    SkipSpace();
    return p_ == end_ ? '\0' : *p_;
  }

  // A string of printable ASCII without escapes, after its opening quote
  // has been consumed; *out is its content.
  bool PlainString(absl::string_view* out) {
    const char* start = p_;
    while (p_ < end_) {
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *out = absl::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x7f) return false;
      ++p_;
    }
    return false;
  }

  // The text of the value that starts here, for nlohmann::json to parse:
  // a string with any content, an array or object nested at most
  // kMaxHeaderDepth deep, or a scalar (a number, true, false, null) up to
  // the next delimiter.
  bool ValueText(absl::string_view* out) {
    SkipSpace();
    const char* start = p_;
    if (p_ == end_) return false;
    const char first = *p_;
    if (first == '"') {
      ++p_;
      if (!SkipString()) return false;
    } else if (first == '[' || first == '{') {
      int depth = 0;
      while (p_ < end_) {
        const char c = *p_++;
        if (c == '"') {
          if (!SkipString()) return false;
        } else if (c == '[' || c == '{') {
          if (++depth > kMaxHeaderDepth) return false;
        } else if ((c == ']' || c == '}') && --depth == 0) {
          break;
        }
      }
      if (depth != 0) return false;
    } else if (first == '-' || (first >= '0' && first <= '9') || first == 't' || first == 'f' ||
               first == 'n') {
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' &&
             *p_ != '\r' && *p_ != '\t') {
        ++p_;
      }
    } else {
      return false;
    }
    *out = absl::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

  // "ranks": [[action or null, ...], ...].
  bool Programs(std::vector<RankProgram>* ranks) {
    if (!Consume('[')) return false;
    if (Next() == ']') return Consume(']');
    do {
      RankProgram& program = ranks->emplace_back();
      if (!Program(&program)) return false;
    } while (Consume(','));
    return Consume(']');
  }

 private:
  // Past a string's closing quote (escapes allowed: nlohmann checks them).
  bool SkipString() {
    while (p_ < end_) {
      if (*p_ == '\\') {
        if (end_ - p_ < 2) return false;
        p_ += 2;
        continue;
      }
      if (*p_++ == '"') return true;
    }
    return false;
  }

  bool Program(RankProgram* program) {
    if (!Consume('[')) return false;
    if (Next() == ']') return Consume(']');
    program->reserve(CountItems());
    do {
      const char c = Next();
      if (c == 'n') {
        if (end_ - p_ < 4 || absl::string_view(p_, 4) != "null") return false;
        p_ += 4;
        program->push_back(Action::Bubble());
        continue;
      }
      if (c != '"') return false;
      ++p_;
      // Most actions are simple ones, read in place up to their closing
      // quote (their characters need no checking: a simple action holds
      // none that JSON escapes); the others are checked and read by
      // ParseAction.
      Action& action = program->emplace_back();
      if (const char* after = ParseSimpleActionPrefix(p_, end_, &action);
          after != nullptr && after < end_ && *after == '"') {
        p_ = after + 1;
        continue;
      }
      absl::string_view text;
      if (!PlainString(&text)) return false;
      absl::StatusOr<Action> parsed = ParseAction(text);
      if (!parsed.ok()) return false;
      action = *std::move(parsed);
    } while (Consume(','));
    return Consume(']');
  }

  // The number of items of the array that starts here, counted as commas
  // up to the first ']' plus one: exact for the arrays this path takes
  // (action text holds neither), and only a capacity hint. Growing the
  // program instead cost more than parsing it: each doubling touches fresh
  // pages, at 10 us per page fault here (issue 19).
  size_t CountItems() const {
    const void* close = std::memchr(p_, ']', static_cast<size_t>(end_ - p_));
    const char* stop = close == nullptr ? end_ : static_cast<const char*>(close);
    return CountCommas(p_, stop) + 1;
  }

  // ',' bytes in [p, stop), eight at a time: a byte of x = word ^ ",,,,,,,,"
  // is zero exactly where the word has a comma, and ~((x & 0x7f..) + 0x7f..
  // | x | 0x7f..) has the high bit of exactly those bytes set.
  static size_t CountCommas(const char* p, const char* stop) {
    constexpr uint64_t kCommas = 0x2c2c2c2c2c2c2c2cULL;
    constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
    size_t count = 0;
    for (; stop - p >= 8; p += 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      const uint64_t x = word ^ kCommas;
      count += static_cast<size_t>(std::popcount(~(((x & kLow7) + kLow7) | x | kLow7)));
    }
    for (; p < stop; ++p) count += *p == ',';
    return count;
  }

  const char* p_;
  const char* const end_;
};

}  // namespace

std::optional<ScannedScheduleJson> ScanScheduleJson(absl::string_view text) {
  Scanner scan(text);
  ScannedScheduleJson out;
  out.header = nlohmann::json::object();
  std::vector<std::string> keys;
  bool has_ranks = false;
  if (!scan.Consume('{')) return std::nullopt;
  do {
    absl::string_view key;
    if (!scan.Consume('"') || !scan.PlainString(&key) || !scan.Consume(':')) return std::nullopt;
    if (absl::c_linear_search(keys, key)) return std::nullopt;
    keys.emplace_back(key);
    if (key == "ranks") {
      if (!scan.Programs(&out.ranks)) return std::nullopt;
      has_ranks = true;
      continue;
    }
    absl::string_view value;
    if (!scan.ValueText(&value)) return std::nullopt;
    nlohmann::json parsed = nlohmann::json::parse(value.begin(), value.end(), nullptr,
                                                  /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return std::nullopt;
    out.header[std::string(key)] = std::move(parsed);
  } while (scan.Consume(','));
  if (!scan.Consume('}')) return std::nullopt;
  scan.SkipSpace();
  if (!scan.AtEnd() || !has_ranks) return std::nullopt;
  return out;
}

}  // namespace jitpipe
