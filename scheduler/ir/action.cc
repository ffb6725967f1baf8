#include "scheduler/ir/action.h"

#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/json_document.h"

namespace jitpipe {
namespace {

struct KindInfo {
  ActionKind kind;
  absl::string_view name;
};

// Longest names first so that the parser's prefix match picks "SEND_F" over
// nothing, "REDUCE_GRAD" before "RE..." alternatives and "WAIT_SEND_F" before
// "W" (a weight backward).
constexpr std::array<KindInfo, 14> kSimpleKindsLongestFirst = {{
    {ActionKind::kWaitReduceGrad, "WAIT_REDUCE_GRAD"},
    {ActionKind::kReduceGrad, "REDUCE_GRAD"},
    {ActionKind::kWaitSendF, "WAIT_SEND_F"},
    {ActionKind::kWaitSendB, "WAIT_SEND_B"},
    {ActionKind::kUnshard, "UNSHARD"},
    {ActionKind::kReshard, "RESHARD"},
    {ActionKind::kSendF, "SEND_F"},
    {ActionKind::kRecvF, "RECV_F"},
    {ActionKind::kSendB, "SEND_B"},
    {ActionKind::kRecvB, "RECV_B"},
    {ActionKind::kForward, "F"},
    {ActionKind::kBackward, "B"},
    {ActionKind::kBackwardInput, "I"},
    {ActionKind::kBackwardWeight, "W"},
}};

constexpr absl::string_view kOverlapName = "OVERLAP_F_B";

// A cursor over the action text that reports errors with 1-based positions.
// Input quoted in a message, with every byte that is not printable ASCII
// shown as <XX> (as base/json_document.cc does): a message stays one line of
// valid UTF-8 whatever the input holds (a NUL used to cut it short).
std::string Shown(absl::string_view text);

// The action text quoted for a message; a long one is abbreviated with its
// length (base/json_document.h, QuoteForMessage).
std::string Quoted(absl::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return absl::StrCat("\"", Shown(text), "\"");
  return absl::StrCat("\"", Shown(text.substr(0, 48)), "...", Shown(text.substr(text.size() - 12)),
                      "\" (", text.size(), " bytes)");
}

std::string Shown(absl::string_view text) {
  std::string out;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("<%02X>", u));
    } else {
      out += c;
    }
  }
  return out;
}

class Cursor {
 public:
  Cursor(absl::string_view full, size_t begin, size_t end)
      : full_(full), pos_(begin), end_(end) {}

  bool AtEnd() const { return pos_ >= end_; }
  char Peek() const { return full_[pos_]; }
  size_t pos() const { return pos_; }
  void Advance(size_t n) { pos_ += n; }
  bool StartsWith(absl::string_view s) const {
    return end_ - pos_ >= s.size() && full_.substr(pos_, s.size()) == s;
  }
  size_t Remaining() const { return end_ - pos_; }
  // The character `offset` places ahead. REQUIRES: offset < Remaining().
  char At(size_t offset) const { return full_[pos_ + offset]; }

  absl::Status Error(absl::string_view expected) const {
    std::string found = AtEnd() ? "the end of the text"
                                : absl::StrCat("\"", Shown(full_.substr(pos_, 1)), "\"");
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot parse action ", Quoted(full_), ": ", AtEnd() ? "" : "unexpected ",
        found, " at character ", pos_ + 1, "; expected ", expected));
  }

  // Reads a decimal number without sign or leading zeros that fits in int32.
  // `what` names it: "stage number".
  absl::StatusOr<int32_t> Number(absl::string_view what) {
    if (AtEnd() || !std::isdigit(static_cast<unsigned char>(Peek()))) {
      return Error(absl::StrCat("a ", what));
    }
    size_t start = pos_;
    int64_t value = 0;
    while (!AtEnd() && std::isdigit(static_cast<unsigned char>(Peek()))) {
      value = value * 10 + (Peek() - '0');
      if (value > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot parse action ", Quoted(full_), ": the ", what, " at character ",
            start + 1, " does not fit in 31 bits"));
      }
      ++pos_;
    }
    if (pos_ - start > 1 && full_[start] == '0') {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot parse action ", Quoted(full_), ": the ", what, " at character ",
          start + 1, " has a leading zero"));
    }
    return static_cast<int32_t>(value);
  }

 private:
  absl::string_view full_;
  size_t pos_;
  size_t end_;
};

absl::StatusOr<Action> ParseSimple(Cursor& c) {
  auto stage = c.Number("stage number");
  if (!stage.ok()) return stage.status();
  const KindInfo* info = nullptr;
  for (const KindInfo& k : kSimpleKindsLongestFirst) {
    if (c.StartsWith(k.name)) {
      info = &k;
      break;
    }
  }
  // A name that goes on after a known one ("WAIT_SEND_X" after "W") is an
  // unknown type, not a known one followed by garbage.
  if (info != nullptr && c.Remaining() > info->name.size()) {
    const char next = c.At(info->name.size());
    if (next == '_' || (next >= 'A' && next <= 'Z')) info = nullptr;
  }
  if (info == nullptr) {
    return c.Error("an action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
                   "WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or "
                   "WAIT_REDUCE_GRAD)");
  }
  c.Advance(info->name.size());
  if (!HasMicrobatch(info->kind)) {
    return Action::StageWide(info->kind, *stage);
  }
  auto mb = c.Number(absl::StrCat("microbatch number after ", info->name));
  if (!mb.ok()) return mb.status();
  return Action::Make(info->kind, *stage, *mb);
}

// Files hold millions of actions: ParseAction tries this first.
}  // namespace

namespace {

// Whether [p, p + left) starts with the literal (a fixed-size compare).
template <size_t N>
bool StartsWithLiteral(const char* p, size_t left, const char (&literal)[N]) {
  return left >= N - 1 && std::memcmp(p, literal, N - 1) == 0;
}

// A number at *p without sign or leading zeros that fits in 31 bits (at
// most 10 digits); *p moves past it.
[[gnu::always_inline]] inline bool ReadNumber(const char*& p, const char* end, int32_t* value) {
  const char* q = p;
  if (q == end) return false;
  unsigned digit = static_cast<unsigned char>(*q) - unsigned{'0'};
  if (digit > 9) return false;
  ++q;
  uint64_t v = digit;
  if (v != 0) {
    const char* const limit = end - q > 9 ? q + 9 : end;
    while (q < limit && (digit = static_cast<unsigned char>(*q) - unsigned{'0'}) <= 9) {
      v = v * 10 + digit;
      ++q;
    }
  }
  // A digit after a leading zero, or an eleventh digit.
  if (q < end && static_cast<unsigned char>(*q) - unsigned{'0'} <= 9) return false;
  if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
  *value = static_cast<int32_t>(v);
  p = q;
  return true;
}

}  // namespace

const char* ParseSimpleActionPrefix(const char* p, const char* const end, Action* out) {
  int32_t stage = 0;
  if (!ReadNumber(p, end, &stage) || p == end) return nullptr;
  // The kind, by its first letter, longest name first as in
  // kSimpleKindsLongestFirst ("WAIT_SEND_F" before "W").
  const size_t left = static_cast<size_t>(end - p);
  ActionKind kind;
  size_t length = 1;
  switch (*p) {
    case 'F': kind = ActionKind::kForward; break;
    case 'B': kind = ActionKind::kBackward; break;
    case 'I': kind = ActionKind::kBackwardInput; break;
    case 'W':
      if (StartsWithLiteral(p, left, "WAIT_SEND_") && left >= 11 && (p[10] == 'F' || p[10] == 'B')) {
        kind = p[10] == 'F' ? ActionKind::kWaitSendF : ActionKind::kWaitSendB;
        length = 11;
      } else if (StartsWithLiteral(p, left, "WAIT_REDUCE_GRAD")) {
        kind = ActionKind::kWaitReduceGrad;
        length = 16;
      } else {
        kind = ActionKind::kBackwardWeight;
      }
      break;
    case 'S':
      if (!StartsWithLiteral(p, left, "SEND_") || left < 6 || (p[5] != 'F' && p[5] != 'B')) {
        return nullptr;
      }
      kind = p[5] == 'F' ? ActionKind::kSendF : ActionKind::kSendB;
      length = 6;
      break;
    case 'R':
      if (StartsWithLiteral(p, left, "RECV_") && left >= 6 && (p[5] == 'F' || p[5] == 'B')) {
        kind = p[5] == 'F' ? ActionKind::kRecvF : ActionKind::kRecvB;
        length = 6;
      } else if (StartsWithLiteral(p, left, "RESHARD")) {
        kind = ActionKind::kReshard;
        length = 7;
      } else if (StartsWithLiteral(p, left, "REDUCE_GRAD")) {
        kind = ActionKind::kReduceGrad;
        length = 11;
      } else {
        return nullptr;
      }
      break;
    case 'U':
      if (!StartsWithLiteral(p, left, "UNSHARD")) return nullptr;
      kind = ActionKind::kUnshard;
      length = 7;
      break;
    default:
      return nullptr;
  }
  p += length;
  if (!HasMicrobatch(kind)) {
    *out = Action::StageWide(kind, stage);
    return p;
  }
  int32_t microbatch = 0;
  if (!ReadNumber(p, end, &microbatch)) return nullptr;
  *out = Action::Make(kind, stage, microbatch);
  return p;
}

bool TryParseSimpleAction(absl::string_view text, Action* out) {
  const char* const end = text.data() + text.size();
  Action parsed;
  if (ParseSimpleActionPrefix(text.data(), end, &parsed) != end) return false;
  *out = std::move(parsed);
  return true;
}

namespace {

// By the enum's value (action.h); every writer reads this per action.
constexpr absl::string_view kKindNames[kNumActionKinds] = {
    "F",      "B",      "I",       "W",           "SEND_F",      "RECV_F",
    "SEND_B", "RECV_B", "UNSHARD", "RESHARD",     "REDUCE_GRAD", "WAIT_SEND_F",
    "WAIT_SEND_B",      "WAIT_REDUCE_GRAD",       kOverlapName,  ""};
static_assert(static_cast<int>(ActionKind::kBubble) == kNumActionKinds - 1);

// The names padded to 16 bytes, so that a writer copies a fixed 16 bytes
// (one move, no call) and advances by the name's size.
struct PaddedName {
  char text[16] = {};
  size_t size = 0;
};
constexpr std::array<PaddedName, kNumActionKinds> PadNames() {
  std::array<PaddedName, kNumActionKinds> padded{};
  for (int k = 0; k < kNumActionKinds; ++k) {
    for (size_t i = 0; i < kKindNames[k].size(); ++i) padded[k].text[i] = kKindNames[k][i];
    padded[k].size = kKindNames[k].size();
  }
  return padded;
}
constexpr std::array<PaddedName, kNumActionKinds> kPaddedNames = PadNames();
static_assert(kMaxSimpleActionText >= 10 + 16 + 10);

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Writes n's decimal digits at `to`; returns the end. REQUIRES: n >= 0.
char* WriteDecimal(int32_t n, char* to) {
  if (n < 10) {
    *to = static_cast<char>('0' + n);
    return to + 1;
  }
  if (n < 100) {
    std::memcpy(to, kDigitPairs + 2 * n, 2);
    return to + 2;
  }
  if (n < 1000) {
    *to = static_cast<char>('0' + n / 100);
    std::memcpy(to + 1, kDigitPairs + 2 * (n % 100), 2);
    return to + 3;
  }
  if (n < 10000) {
    std::memcpy(to, kDigitPairs + 2 * (n / 100), 2);
    std::memcpy(to + 2, kDigitPairs + 2 * (n % 100), 2);
    return to + 4;
  }
  char digits[10];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  while (count > 0) *to++ = digits[--count];
  return to;
}

}  // namespace

char* WriteSimpleActionText(const Action& action, char* to) {
  if (action.is_bubble() || action.is_compound() || action.stage < 0 ||
      (HasMicrobatch(action.kind) && action.microbatch < 0) ||
      static_cast<size_t>(action.kind) >= kNumActionKinds) {
    return nullptr;
  }
  const PaddedName& name = kPaddedNames[static_cast<size_t>(action.kind)];
  char* p = WriteDecimal(action.stage, to);
  std::memcpy(p, name.text, sizeof(name.text));
  p += name.size;
  if (HasMicrobatch(action.kind)) p = WriteDecimal(action.microbatch, p);
  return p;
}

void AppendActionText(const Action& action, std::string* out) {
  if (action.is_bubble()) return;
  char buffer[kMaxSimpleActionText];
  if (const char* end = WriteSimpleActionText(action, buffer)) {
    out->append(buffer, static_cast<size_t>(end - buffer));
    return;
  }
  out->append(action.ToString());
}

absl::string_view KindName(ActionKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kNumActionKinds ? kKindNames[index] : "?";
}

Action Action::StageWide(ActionKind kind, int32_t stage) {
  return Make(kind, stage, kNoMicrobatch);
}

Action Action::Overlap(std::vector<Action> sub_actions) {
  Action a;
  a.kind = ActionKind::kOverlapFB;
  a.stage = -1;
  a.sub_actions = std::move(sub_actions);
  return a;
}

std::string Action::ToString() const {
  switch (kind) {
    case ActionKind::kBubble:
      return "";
    case ActionKind::kOverlapFB:
      return absl::StrCat(
          "(",
          absl::StrJoin(sub_actions, ";",
                        [](std::string* out, const Action& a) {
                          absl::StrAppend(out, a.ToString());
                        }),
          ")", kOverlapName);
    default:
      break;
  }
  if (!HasMicrobatch(kind)) return absl::StrCat(stage, KindName(kind));
  return absl::StrCat(stage, KindName(kind), microbatch);
}

absl::StatusOr<Action> ParseAction(absl::string_view text) {
  if (Action fast; TryParseSimpleAction(text, &fast)) return fast;
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && absl::ascii_isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && absl::ascii_isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  Cursor c(text, begin, end);
  if (c.AtEnd()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse action ", Quoted(text), ": it is empty"));
  }
  if (c.Peek() != '(') {
    auto action = ParseSimple(c);
    if (!action.ok()) return action.status();
    if (!c.AtEnd()) return c.Error("the end of the action");
    return action;
  }
  c.Advance(1);
  std::vector<Action> subs;
  while (true) {
    size_t sub_start = c.pos();
    auto sub = ParseSimple(c);
    if (!sub.ok()) return sub.status();
    if (!IsCompute(sub->kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot parse action ", Quoted(text), ": the sub-action at character ",
          sub_start + 1, " is ", KindName(sub->kind),
          "; an OVERLAP_F_B holds only F, B, I and W"));
    }
    subs.push_back(*std::move(sub));
    if (c.AtEnd()) return c.Error("\";\" or \")\"");
    if (c.Peek() == ';') {
      c.Advance(1);
      continue;
    }
    if (c.Peek() == ')') {
      c.Advance(1);
      break;
    }
    return c.Error("\";\" or \")\"");
  }
  if (!c.StartsWith(kOverlapName)) return c.Error("OVERLAP_F_B after \")\"");
  c.Advance(kOverlapName.size());
  if (!c.AtEnd()) return c.Error("the end of the action");
  return Action::Overlap(std::move(subs));
}

std::string WhereInProgram(int64_t rank, int64_t index, absl::string_view action_text) {
  return absl::StrCat("rank ", rank, ", index ", index, " (", action_text, ")");
}

}  // namespace jitpipe
