#include "base/json_text.h"

#include <charconv>

namespace jitpipe {
namespace {

constexpr absl::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

bool InRange(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629,
// table 3-7 of the Unicode standard), or 0 when it is ill-formed.
// REQUIRES: s[i] >= 0x80.
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  auto byte = [&](size_t k) -> unsigned char {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
  };
  unsigned char lead = byte(0);
  // The valid range of the second byte depends on the lead byte; the
  // following bytes are always continuation bytes 80..BF.
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (InRange(lead, 0xC2, 0xDF)) {
    length = 2;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (InRange(lead, 0xF0, 0xF4)) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (!InRange(byte(1), lo, hi)) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (!InRange(byte(k), 0x80, 0xBF)) return 0;
  }
  return length;
}

void AppendEscapedAscii(std::string* out, unsigned char c) {
  switch (c) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\b':
      out->append("\\b");
      return;
    case '\f':
      out->append("\\f");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out->append(escaped, sizeof escaped);
    }
  }
}

bool NeedsEscape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80; }

}  // namespace

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    // Copy the longest run of plain ASCII in one append.
    size_t run = i;
    while (run < s.size() && !NeedsEscape(static_cast<unsigned char>(s[run]))) ++run;
    out->append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      AppendEscapedAscii(out, c);
      ++i;
    } else if (size_t length = Utf8SequenceLength(s, i); length > 0) {
      out->append(s.data() + i, length);
      i += length;
    } else {
      out->append(kReplacementCharacter.data(), kReplacementCharacter.size());
      ++i;
    }
  }
  out->push_back('"');
}

void AppendJsonDouble(std::string* out, double value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out->append(buffer, result.ptr);
}

void AppendJsonInt(std::string* out, int64_t value) {
  char buffer[24];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out->append(buffer, result.ptr);
}

void AppendMicrosFromNanos(std::string* out, int64_t nanos) {
  if (nanos < 0) out->push_back('-');
  // Work on the magnitude as unsigned so that INT64_MIN is safe.
  uint64_t magnitude = nanos < 0 ? 0 - static_cast<uint64_t>(nanos) : static_cast<uint64_t>(nanos);
  char buffer[24];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, magnitude / 1000);
  out->append(buffer, result.ptr);
  uint64_t fraction = magnitude % 1000;
  if (fraction == 0) return;
  char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                    static_cast<char>('0' + fraction / 10 % 10), static_cast<char>('0' + fraction % 10)};
  size_t length = 4;
  while (digits[length - 1] == '0') --length;
  out->append(digits, length);
}

std::string MicrosFromNanos(int64_t nanos) {
  std::string out;
  AppendMicrosFromNanos(&out, nanos);
  return out;
}

}  // namespace jitpipe
