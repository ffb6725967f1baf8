#include "traces/trace_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "base/json_text.h"

namespace jitpipe {
namespace {

constexpr absl::string_view kPhases = "XBEiICsfbenM";
// Times beyond this many microseconds overflow int64 nanoseconds.
constexpr double kMaxMicros = 9.0e15;

std::string Text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A trace time in integer nanoseconds, rounded as Perfetto's importer does.
bool ToNanos(const nlohmann::json& value, int64_t* nanos) {
  if (value.is_number_unsigned()) {
    uint64_t micros = value.get<uint64_t>();
    if (micros > static_cast<uint64_t>(kMaxMicros)) return false;
    *nanos = static_cast<int64_t>(micros) * 1000;
    return true;
  }
  if (value.is_number_integer()) {
    int64_t micros = value.get<int64_t>();
    if (micros < 0 || micros > static_cast<int64_t>(kMaxMicros)) return false;
    *nanos = micros * 1000;
    return true;
  }
  if (!value.is_number_float()) return false;
  double micros = value.get<double>();
  if (!std::isfinite(micros) || micros < 0 || micros > kMaxMicros) return false;
  *nanos = std::llround(micros * 1000.0);
  return true;
}

bool IsUint32(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= std::numeric_limits<uint32_t>::max();
  }
  return value.is_number_integer() && value.get<int64_t>() >= 0 &&
         value.get<int64_t>() <= std::numeric_limits<uint32_t>::max();
}

// A v1 flow id as Perfetto reads it: an integer, or a hex string with an
// optional 0x prefix.
bool ParseFlowId(const nlohmann::json& value, uint64_t* id) {
  if (value.is_number_unsigned()) {
    *id = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer()) {
    if (value.get<int64_t>() < 0) return false;
    *id = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  if (!value.is_string()) return false;
  absl::string_view text = value.get_ref<const std::string&>();
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  if (text.empty() || text.size() > 16) return false;
  uint64_t parsed = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return false;
    parsed = parsed * 16 + static_cast<uint64_t>(digit);
  }
  *id = parsed;
  return true;
}

std::string ThreadText(uint64_t thread) {
  return absl::StrCat("pid ", thread >> 32, " tid ", thread & 0xFFFFFFFFu);
}

std::string Span(int64_t begin, int64_t end) {
  return absl::StrCat("[", MicrosFromNanos(begin), ", ", MicrosFromNanos(end), ") us");
}

}  // namespace

uint32_t TraceRules::Intern(absl::string_view text) {
  if (auto it = string_ids_.find(text); it != string_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  string_ids_.emplace(std::string(text), id);
  return id;
}

std::string TraceRules::Describe(int64_t index, char ph, uint32_t name) const {
  return absl::StrCat("event ", index, " (ph \"", absl::string_view(&ph, 1), "\", name ",
                      JsonQuote(strings_[name]), ")");
}

absl::Status TraceRules::Error(int64_t index, char ph, uint32_t name,
                               absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(Describe(index, ph, name), ": ", what));
}

void TraceRules::AddEvent(const nlohmann::json& event) {
  int64_t index = summary_.events++;
  if (status_.ok()) status_ = CheckEvent(event, index);
}

absl::Status TraceRules::CheckEvent(const nlohmann::json& event, int64_t index) {
  Header header{.index = index, .ph = 0, .thread = 0, .name = 0, .cat = 0, .ts = 0};
  RETURN_IF_ERROR(CheckHeader(event, &header));
  return CheckByPhase(event, header);
}

// The fields every event has; fills `header` as they check out.
absl::Status TraceRules::CheckHeader(const nlohmann::json& event, Header* header) {
  const int64_t index = header->index;
  if (!event.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("event ", index, ": not a JSON object, found ", Text(event)));
  }
  auto ph = event.find("ph");
  if (ph == event.end()) {
    return absl::InvalidArgumentError(absl::StrCat("event ", index, ": missing \"ph\""));
  }
  if (!ph->is_string() || ph->get_ref<const std::string&>().size() != 1 ||
      kPhases.find(ph->get_ref<const std::string&>()[0]) == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "event ", index, ": \"ph\" must be one of X B E i I C s f b e n M, found ", Text(*ph)));
  }
  header->ph = ph->get_ref<const std::string&>()[0];
  auto name = event.find("name");
  if (name == event.end() || !name->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "event ", index, " (ph \"", absl::string_view(&header->ph, 1), "\"): \"name\" ",
        name == event.end() ? "is missing" : absl::StrCat("must be a string, found ", Text(*name))));
  }
  header->name = Intern(name->get_ref<const std::string&>());
  auto fail = [&](absl::string_view what) { return Error(index, header->ph, header->name, what); };
  for (const char* key : {"pid", "tid"}) {
    auto it = event.find(key);
    if (it == event.end()) return fail(absl::StrCat("missing \"", key, "\""));
    if (!IsUint32(*it)) {
      return fail(absl::StrCat("\"", key, "\" must be an integer in [0, 4294967295], found ",
                               Text(*it)));
    }
  }
  header->thread = (event["pid"].get<uint64_t>() << 32) | event["tid"].get<uint64_t>();
  auto cat = event.find("cat");
  if (cat != event.end() && !cat->is_string()) {
    return fail(absl::StrCat("\"cat\" must be a string, found ", Text(*cat)));
  }
  header->cat = Intern(cat == event.end() ? "" : cat->get_ref<const std::string&>());
  if (auto args = event.find("args"); args != event.end() && !args->is_object()) {
    return fail(absl::StrCat("\"args\" must be an object, found ", Text(*args)));
  }
  auto ts = event.find("ts");
  if (ts == event.end()) return header->ph == 'M' ? absl::OkStatus() : fail("missing \"ts\"");
  if (!ToNanos(*ts, &header->ts)) {
    return fail(absl::StrCat("\"ts\" must be a number in [0, 9e15] (microseconds), found ",
                             Text(*ts)));
  }
  summary_.end_nanos = std::max(summary_.end_nanos, header->ts);
  return absl::OkStatus();
}

absl::Status TraceRules::CheckByPhase(const nlohmann::json& event, const Header& h) {
  switch (h.ph) {
    case 'X': {
      auto dur = event.find("dur");
      if (dur == event.end()) {
        return Error(h.index, h.ph, h.name, "missing \"dur\" (Perfetto drops an X without dur)");
      }
      int64_t dur_nanos = 0;
      if (!ToNanos(*dur, &dur_nanos)) {
        return Error(h.index, h.ph, h.name,
                     absl::StrCat("\"dur\" must be a number in [0, 9e15] (microseconds), found ",
                                  Text(*dur)));
      }
      threads_[h.thread].slices.push_back({h.ts, h.ts + dur_nanos, h.index, h.name, h.cat, 'X'});
      ++summary_.slices;
      summary_.end_nanos = std::max(summary_.end_nanos, h.ts + dur_nanos);
      return absl::OkStatus();
    }
    case 'B':
    case 'E':
      threads_[h.thread].begin_end.push_back({h.ts, h.index, h.name, h.cat, h.ph});
      return absl::OkStatus();
    case 'C':
      return CheckCounter(event, h);
    case 'i':
    case 'I': {
      auto scope = event.find("s");
      if (scope != event.end() &&
          !(scope->is_string() && (*scope == "t" || *scope == "p" || *scope == "g"))) {
        return Error(h.index, h.ph, h.name,
                     absl::StrCat("\"s\" must be \"t\", \"p\" or \"g\", found ", Text(*scope)));
      }
      ++summary_.instants;
      return absl::OkStatus();
    }
    case 's':
    case 'f':
      return CheckFlowEvent(event, h);
    case 'M':
      return CheckMetadata(event, h);
    default: {  // b, e, n: async slices live on tracks keyed by id
      auto id2 = event.find("id2");
      bool has_id2 = id2 != event.end() && id2->is_object() &&
                     (id2->contains("local") || id2->contains("global"));
      if (event.contains("id") || has_id2) return absl::OkStatus();
      return Error(h.index, h.ph, h.name,
                   "an async event needs \"id\", or \"id2\" with \"local\" or \"global\"");
    }
  }
}

absl::Status TraceRules::CheckCounter(const nlohmann::json& event, const Header& h) {
  auto args = event.find("args");
  if (args == event.end() || args->empty()) {
    return Error(h.index, h.ph, h.name, "a counter needs a non-empty \"args\" object of numbers");
  }
  for (const auto& [key, value] : args->items()) {
    if (!value.is_number() || (value.is_number_float() && !std::isfinite(value.get<double>()))) {
      return Error(h.index, h.ph, h.name,
                   absl::StrCat("counter arg ", JsonQuote(key), " must be a finite number, found ",
                                Text(value)));
    }
  }
  ++summary_.counters;
  return absl::OkStatus();
}

absl::Status TraceRules::CheckFlowEvent(const nlohmann::json& event, const Header& h) {
  auto id_field = event.find("id");
  if (id_field == event.end()) return Error(h.index, h.ph, h.name, "missing \"id\"");
  uint64_t id = 0;
  if (!ParseFlowId(*id_field, &id)) {
    return Error(h.index, h.ph, h.name,
                 absl::StrCat("\"id\" must be a non-negative integer or a hex string, found ",
                              Text(*id_field)));
  }
  if (h.ph == 'f') {
    auto bp = event.find("bp");
    if (bp == event.end() || *bp != "e") {
      return Error(h.index, h.ph, h.name,
                   "a flow end needs \"bp\": \"e\" (bind to the enclosing slice)");
    }
  }
  auto [it, inserted] = flow_by_key_.try_emplace({id, h.cat, h.name}, flows_.size());
  if (inserted) flows_.push_back(Flow{.id = id, .cat = h.cat, .name = h.name});
  Flow& flow = flows_[it->second];
  int64_t& slot = h.ph == 's' ? flow.start_index : flow.end_index;
  if (slot >= 0) {
    return Error(h.index, h.ph, h.name,
                 absl::StrCat("flow id ", id, " (cat ", JsonQuote(strings_[h.cat]), ") already has ",
                              h.ph == 's' ? "a start" : "an end", " at event ", slot));
  }
  slot = h.index;
  (h.ph == 's' ? flow.start_ts : flow.end_ts) = h.ts;
  threads_[h.thread].flow_events.push_back({h.ts, h.index, h.name, h.cat, h.ph});
  return absl::OkStatus();
}

absl::Status TraceRules::CheckMetadata(const nlohmann::json& event, const Header& h) {
  const std::string& name = strings_[h.name];
  const char* arg = nullptr;
  if (name == "process_name" || name == "thread_name") {
    arg = "name";
  } else if (name == "process_sort_index" || name == "thread_sort_index") {
    arg = "sort_index";
  } else {
    return Error(h.index, h.ph, h.name,
                 "metadata must be process_name, thread_name, process_sort_index or "
                 "thread_sort_index");
  }
  auto args = event.find("args");
  const nlohmann::json* value = nullptr;
  if (args != event.end() && args->contains(arg)) value = &(*args)[arg];
  bool ok = value != nullptr &&
            (arg == absl::string_view("name") ? value->is_string() : value->is_number_integer());
  if (!ok) {
    return Error(h.index, h.ph, h.name,
                 absl::StrCat("\"args.", arg, "\" must be ",
                              arg == absl::string_view("name") ? "a string" : "an integer",
                              value == nullptr ? "" : absl::StrCat(", found ", Text(*value))));
  }
  ++summary_.metadata;
  return absl::OkStatus();
}

absl::StatusOr<ChromeTraceSummary> TraceRules::Finish() {
  if (!status_.ok()) return status_;
  std::vector<uint64_t> keys;
  keys.reserve(threads_.size());
  for (const auto& [key, thread] : threads_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (uint64_t key : keys) RETURN_IF_ERROR(MatchBeginEnd(key, threads_[key]));
  for (uint64_t key : keys) RETURN_IF_ERROR(CheckNesting(key, threads_[key]));
  RETURN_IF_ERROR(CheckFlowPairs());
  for (uint64_t key : keys) RETURN_IF_ERROR(CheckFlowBindings(key, threads_[key]));
  summary_.flows = static_cast<int64_t>(flows_.size());
  return summary_;
}

// Pairs B and E LIFO in ts order (file order among equal ts, as Perfetto's
// sorter keeps it) and adds the pairs to the thread's slices.
absl::Status TraceRules::MatchBeginEnd(uint64_t thread_key, Thread& thread) {
  std::vector<Mark>& marks = thread.begin_end;
  std::stable_sort(marks.begin(), marks.end(),
                   [](const Mark& a, const Mark& b) { return a.ts < b.ts; });
  std::vector<const Mark*> open;
  for (const Mark& mark : marks) {
    if (mark.ph == 'B') {
      open.push_back(&mark);
      continue;
    }
    if (open.empty()) {
      return Error(mark.index, 'E', mark.name,
                   absl::StrCat("E without an open B on ", ThreadText(thread_key)));
    }
    const Mark& begin = *open.back();
    if (begin.name != mark.name || begin.cat != mark.cat) {
      return Error(mark.index, 'E', mark.name,
                   absl::StrCat("E (cat ", JsonQuote(strings_[mark.cat]),
                                ") does not match the open B, event ", begin.index, " (name ",
                                JsonQuote(strings_[begin.name]), ", cat ",
                                JsonQuote(strings_[begin.cat]), ") on ", ThreadText(thread_key)));
    }
    open.pop_back();
    thread.slices.push_back({begin.ts, mark.ts, begin.index, begin.name, begin.cat, 'B'});
    ++summary_.slices;
  }
  if (!open.empty()) {
    const Mark& begin = *open.back();
    return Error(begin.index, 'B', begin.name,
                 absl::StrCat("B without a matching E on ", ThreadText(thread_key)));
  }
  marks = {};
  return absl::OkStatus();
}

// Sorts the thread's slices by (begin, longest first, file order) and walks
// them with a stack of the enclosing slices.
absl::Status TraceRules::CheckNesting(uint64_t thread_key, Thread& thread) {
  std::vector<Slice>& slices = thread.slices;
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::tie(a.begin, b.end, a.index) < std::tie(b.begin, a.end, b.index);
  });
  std::vector<const Slice*> enclosing;
  for (const Slice& slice : slices) {
    while (!enclosing.empty() && enclosing.back()->end <= slice.begin) enclosing.pop_back();
    if (!enclosing.empty() && slice.end > enclosing.back()->end) {
      const Slice& outer = *enclosing.back();
      return Error(slice.index, slice.ph, slice.name,
                   absl::StrCat("slice ", Span(slice.begin, slice.end), " on ",
                                ThreadText(thread_key), " overlaps event ", outer.index, " (name ",
                                JsonQuote(strings_[outer.name]), ", ", Span(outer.begin, outer.end),
                                ") without nesting"));
    }
    enclosing.push_back(&slice);
  }
  return absl::OkStatus();
}

absl::Status TraceRules::CheckFlowPairs() const {
  for (const Flow& flow : flows_) {
    std::string what = absl::StrCat("flow id ", flow.id, " (cat ", JsonQuote(strings_[flow.cat]), ")");
    if (flow.end_index < 0) {
      return Error(flow.start_index, 's', flow.name, absl::StrCat(what, " has no f event"));
    }
    if (flow.start_index < 0) {
      return Error(flow.end_index, 'f', flow.name, absl::StrCat(what, " has no s event"));
    }
    if (flow.end_index < flow.start_index) {
      return Error(flow.end_index, 'f', flow.name,
                   absl::StrCat(what, " ends before its start, event ", flow.start_index,
                                ", in the file"));
    }
    if (flow.end_ts <= flow.start_ts) {
      return Error(flow.end_index, 'f', flow.name,
                   absl::StrCat(what, " ends at ", MicrosFromNanos(flow.end_ts),
                                " us, not later than its start, event ", flow.start_index, ", at ",
                                MicrosFromNanos(flow.start_ts), " us"));
    }
  }
  return absl::OkStatus();
}

// REQUIRES: CheckNesting sorted the thread's slices by begin.
absl::Status TraceRules::CheckFlowBindings(uint64_t thread_key, const Thread& thread) const {
  const std::vector<Slice>& slices = thread.slices;
  for (const Mark& mark : thread.flow_events) {
    auto first = std::lower_bound(slices.begin(), slices.end(), mark.ts,
                                  [](const Slice& s, int64_t ts) { return s.begin < ts; });
    auto last = std::find_if(first, slices.end(), [&](const Slice& s) { return s.begin != mark.ts; });
    auto fail = [&](absl::string_view what) { return Error(mark.index, mark.ph, mark.name, what); };
    if (first == last) {
      return fail(absl::StrCat("no slice on ", ThreadText(thread_key), " starts at ",
                               MicrosFromNanos(mark.ts),
                               " us; a flow event binds to the slice with the same ts, pid, tid "
                               "and cat"));
    }
    if (last - first > 1) {
      return fail(absl::StrCat(last - first, " slices on ", ThreadText(thread_key), " start at ",
                               MicrosFromNanos(mark.ts), " us (events ", first->index, " and ",
                               (first + 1)->index, "); the flow's slice is ambiguous"));
    }
    if (first->cat != mark.cat) {
      return fail(absl::StrCat("binds to event ", first->index, " (name ",
                               JsonQuote(strings_[first->name]), ") whose cat ",
                               JsonQuote(strings_[first->cat]), " differs from the flow's cat ",
                               JsonQuote(strings_[mark.cat])));
    }
    if (first->index > mark.index) {
      return fail(absl::StrCat("binds to event ", first->index, " (name ",
                               JsonQuote(strings_[first->name]),
                               "), which comes later in the file; write the slice first"));
    }
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
