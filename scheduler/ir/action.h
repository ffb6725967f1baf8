// The action: one entry of a rank's program, in PyTorch's pipelining IR.
//
// Text form (identical to torch.distributed.pipelining's _Action, so
// schedules move between the two unchanged):
//
//   action   := simple | compound
//   simple   := STAGE KIND [MICROBATCH]
//   compound := "(" simple (";" simple)* ")" "OVERLAP_F_B"
//   KIND     := F | B | I | W | SEND_F | RECV_F | SEND_B | RECV_B
//             | WAIT_SEND_F | WAIT_SEND_B
//             | UNSHARD | RESHARD | REDUCE_GRAD | WAIT_REDUCE_GRAD
//   STAGE, MICROBATCH := decimal, no sign, no leading zeros, < 2^31
//
// F, B, I, W, the SEND/RECV kinds and the WAIT_SEND kinds carry a
// microbatch; UNSHARD, RESHARD, REDUCE_GRAD and WAIT_REDUCE_GRAD do not.
// The WAIT kinds are PyTorch main's explicit waits (wait_rules.h says what
// each waits for): sWAIT_SEND_Fm waits until this rank's sSEND_Fm has
// completed, so its buffer may be freed; sWAIT_SEND_Bm the same for
// sSEND_Bm; sWAIT_REDUCE_GRAD until stage s's gradient reduction
// (sREDUCE_GRAD, earlier on the rank) has completed. A compound's sub-actions are compute actions (F, B, I,
// W) run back to back; the compound itself has stage -1 and no microbatch, as
// in PyTorch. Examples: "0F1", "3I0", "1SEND_F2", "2REDUCE_GRAD",
// "1WAIT_SEND_F2", "2WAIT_REDUCE_GRAD", "(4F4;3B0)OVERLAP_F_B".
//
// A bubble (an idle slot in a compute-only program: JSON null, an empty CSV
// cell) is the explicit kind kBubble; its text form is the empty string.
//
// Action is a copyable value type. Formatting then parsing returns an equal
// action; parsing then formatting returns the same text.
#ifndef JITPIPE_SCHEDULER_IR_ACTION_H_
#define JITPIPE_SCHEDULER_IR_ACTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace jitpipe {

enum class ActionKind : uint8_t {
  kForward,         // F
  kBackward,        // B: full backward (input and weight gradients)
  kBackwardInput,   // I: input gradients only
  kBackwardWeight,  // W: weight gradients only; needs the matching I first
  kSendF,           // SEND_F: activation to the next stage
  kRecvF,           // RECV_F: activation from the previous stage
  kSendB,           // SEND_B: gradient to the previous stage
  kRecvB,           // RECV_B: gradient from the next stage
  kUnshard,         // UNSHARD: all-gather a stage's parameters
  kReshard,         // RESHARD: free them again
  kReduceGrad,      // REDUCE_GRAD: reduce a stage's gradients over data parallel
  kWaitSendF,       // WAIT_SEND_F: wait until this rank's SEND_F of (stage, mb) completed
  kWaitSendB,       // WAIT_SEND_B: wait until this rank's SEND_B of (stage, mb) completed
  kWaitReduceGrad,  // WAIT_REDUCE_GRAD: wait until the stage's REDUCE_GRAD completed
  kOverlapFB,       // OVERLAP_F_B: compound of compute sub-actions
  kBubble,          // an idle slot (display and PyTorch round-robin only)
};

inline constexpr int kNumActionKinds = 16;
inline constexpr int32_t kNoMicrobatch = -1;

// The kind's text, e.g. "SEND_F"; "" for kBubble.
absl::string_view KindName(ActionKind kind);

// F, B, I, W and OVERLAP_F_B (PyTorch's is_compute_op). Inline: these run
// once per action in every pass.
inline bool IsCompute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kBackwardInput || kind == ActionKind::kBackwardWeight ||
         kind == ActionKind::kOverlapFB;
}
inline bool IsSend(ActionKind kind) {
  return kind == ActionKind::kSendF || kind == ActionKind::kSendB;
}
inline bool IsRecv(ActionKind kind) {
  return kind == ActionKind::kRecvF || kind == ActionKind::kRecvB;
}
// SEND_F, RECV_F, SEND_B, RECV_B.
inline bool IsSendRecv(ActionKind kind) { return IsSend(kind) || IsRecv(kind); }
// WAIT_SEND_F, WAIT_SEND_B.
inline bool IsWaitSend(ActionKind kind) {
  return kind == ActionKind::kWaitSendF || kind == ActionKind::kWaitSendB;
}
// WAIT_SEND_F, WAIT_SEND_B, WAIT_REDUCE_GRAD.
inline bool IsWait(ActionKind kind) {
  return IsWaitSend(kind) || kind == ActionKind::kWaitReduceGrad;
}
// The SEND a WAIT_SEND waits for: SEND_F for WAIT_SEND_F, SEND_B for
// WAIT_SEND_B. REQUIRES: IsWaitSend(kind).
inline ActionKind WaitedSendKind(ActionKind kind) {
  return kind == ActionKind::kWaitSendF ? ActionKind::kSendF : ActionKind::kSendB;
}
// Kinds whose text carries a microbatch.
inline bool HasMicrobatch(ActionKind kind) {
  return kind != ActionKind::kUnshard && kind != ActionKind::kReshard &&
         kind != ActionKind::kReduceGrad && kind != ActionKind::kWaitReduceGrad &&
         kind != ActionKind::kOverlapFB && kind != ActionKind::kBubble;
}

struct Action;

// The sub-actions of an OVERLAP_F_B: an owned, copyable sequence of actions.
// One pointer wide (null when empty), so that an Action is 24 bytes: programs
// hold millions of actions and almost none is a compound.
class SubActions {
 public:
  SubActions() = default;
  SubActions(std::vector<Action> actions);  // NOLINT: a vector is its value
  SubActions(const SubActions& other);
  SubActions& operator=(const SubActions& other);
  SubActions(SubActions&& other) noexcept : items_(other.items_) { other.items_ = nullptr; }
  SubActions& operator=(SubActions&& other) noexcept;
  ~SubActions();

  bool empty() const { return items_ == nullptr; }
  size_t size() const;
  const Action* begin() const;
  const Action* end() const;
  Action* begin();
  Action* end();
  const Action& operator[](size_t i) const;
  Action& operator[](size_t i);

  friend bool operator==(const SubActions& a, const SubActions& b);

 private:
  std::vector<Action>* items_ = nullptr;  // owned; null or non-empty
};

struct Action {
  ActionKind kind = ActionKind::kBubble;
  int32_t stage = -1;
  int32_t microbatch = kNoMicrobatch;
  SubActions sub_actions;  // kOverlapFB only

  // Constructors for each shape. REQUIRES: the kind fits the shape.
  static Action Make(ActionKind kind, int32_t stage, int32_t microbatch);
  static Action StageWide(ActionKind kind, int32_t stage);  // UNSHARD, ...
  static Action Overlap(std::vector<Action> sub_actions);
  static Action Bubble() { return Action{}; }

  bool is_bubble() const { return kind == ActionKind::kBubble; }
  bool is_compound() const { return kind == ActionKind::kOverlapFB; }

  // PyTorch's text form; "" for a bubble.
  std::string ToString() const;

  friend bool operator==(const Action&, const Action&) = default;
};

inline SubActions::SubActions(std::vector<Action> actions)
    : items_(actions.empty() ? nullptr : new std::vector<Action>(std::move(actions))) {}
inline SubActions::SubActions(const SubActions& other)
    : items_(other.items_ == nullptr ? nullptr : new std::vector<Action>(*other.items_)) {}
inline SubActions& SubActions::operator=(const SubActions& other) {
  if (this != &other) *this = SubActions(other);
  return *this;
}
inline SubActions& SubActions::operator=(SubActions&& other) noexcept {
  std::swap(items_, other.items_);
  return *this;
}
inline SubActions::~SubActions() { delete items_; }
inline size_t SubActions::size() const { return items_ == nullptr ? 0 : items_->size(); }
inline const Action* SubActions::begin() const {
  return items_ == nullptr ? nullptr : items_->data();
}
inline const Action* SubActions::end() const { return begin() + size(); }
inline Action* SubActions::begin() { return items_ == nullptr ? nullptr : items_->data(); }
inline Action* SubActions::end() { return begin() + size(); }
inline const Action& SubActions::operator[](size_t i) const { return (*items_)[i]; }
inline Action& SubActions::operator[](size_t i) { return (*items_)[i]; }
inline bool operator==(const SubActions& a, const SubActions& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return *a.items_ == *b.items_;
}

inline Action Action::Make(ActionKind kind, int32_t stage, int32_t microbatch) {
  Action a;
  a.kind = kind;
  a.stage = stage;
  a.microbatch = microbatch;
  return a;
}

static_assert(sizeof(Action) == 24, "programs hold millions of actions; keep Action small");

// How every message names an action of a program, whichever part of the
// engine meets it: "rank 1, index 4 (1SEND_F0)". `action_text` is the
// action's text as the message should show it (ToString(), or the input's
// own text, quoted, when it did not parse).
std::string WhereInProgram(int64_t rank, int64_t index, absl::string_view action_text);

// Parses PyTorch's text form strictly. Leading and trailing whitespace is
// ignored (as PyTorch does); anything else PyTorch would silently misread is
// refused: trailing characters, a missing or superfluous microbatch, numbers
// with leading zeros or that do not fit in 31 bits, an empty string.
// Errors: InvalidArgument saying what was expected at which character
// (counted from 1), e.g.
//   cannot parse action "0F1x": unexpected "x" at character 4; expected the end of the action
absl::StatusOr<Action> ParseAction(absl::string_view text);

// ParseAction's common case on its own: a simple action of digits, capital
// letters and underscores only, e.g. "12SEND_F3" or "4REDUCE_GRAD". Returns
// true and sets *out when `text` is one, exactly as ParseAction would;
// false for anything else (an error, whitespace, a compound), which
// ParseAction then reads and explains.
bool TryParseSimpleAction(absl::string_view text, Action* out);

// The same at the start of [p, end): the simple action whose text starts at
// p and ends where such text can end (after the microbatch's digits, or the
// name of a kind without one), into *out; returns that end, or nullptr when
// no simple action starts at p. A reader checks what follows (a JSON
// reader: the closing quote), so text need not be delimited first.
const char* ParseSimpleActionPrefix(const char* p, const char* end, Action* out);

// Appends ToString()'s text to *out, without a temporary string (writers of
// millions of actions: schedule_json.cc, schedule_csv.cc).
void AppendActionText(const Action& action, std::string* out);

// The most WriteSimpleActionText writes: two 10-digit numbers around the
// longest kind name.
inline constexpr size_t kMaxSimpleActionText = 40;

// ToString()'s text of a simple action (not a bubble, not a compound, no
// negative stage or microbatch) written at `to`, which has room for
// kMaxSimpleActionText bytes; returns the end of the text. Returns nullptr,
// writing nothing, for any other action (AppendActionText writes those).
char* WriteSimpleActionText(const Action& action, char* to);

// Calls `fn(const Action&)` on the compute parts of `action`: the action
// itself when it is F, B, I or W; each sub-action of an OVERLAP_F_B; nothing
// otherwise.
template <typename Fn>
void ForEachComputePart(const Action& action, Fn&& fn) {
  if (action.is_compound()) {
    for (const Action& sub : action.sub_actions) fn(sub);
  } else if (IsCompute(action.kind)) {
    fn(action);
  }
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_ACTION_H_
