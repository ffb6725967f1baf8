#include "traces/trace_checker.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json_document.h"
#include "traces/trace_rules.h"

namespace jitpipe {
namespace {

constexpr absl::string_view kContainerError =
    "a trace is a JSON array of events or an object with a \"traceEvents\" array";

absl::Status CheckDisplayTimeUnit(const nlohmann::json& unit) {
  if (unit.is_string() && (unit == "ms" || unit == "ns")) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "\"displayTimeUnit\" must be \"ms\" or \"ns\", found ",
      unit.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

// Tracks where the streaming parser is in the container and hands each
// element of the event array to the checker, discarding it afterwards so
// that the parsed tree never holds more than one event.
//
// Depths as nlohmann's callback reports them: the root container is 0, its
// keys and values 1, the elements of a root array or of the root object's
// "traceEvents" array 1 or 2.
class StreamingContainer {
 public:
  explicit StreamingContainer(ChromeTraceChecker* checker) : checker_(checker) {}

  bool OnEvent(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > kMaxJsonDepth) {
      if (error_.ok()) {
        error_ = absl::InvalidArgumentError(
            absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
      }
      return false;
    }
    bool element_done = event == Event::value || event == Event::object_end ||
                        event == Event::array_end;
    if (in_events_ && depth == element_depth_ && element_done) {
      checker_->AddEvent(parsed);
      return false;
    }
    if (event == Event::array_start && (depth == 0 || (depth == 1 && key_ == "traceEvents"))) {
      in_events_ = true;
      saw_events_ = true;
      element_depth_ = depth + 1;
    } else if (event == Event::array_end && in_events_ && depth == element_depth_ - 1) {
      in_events_ = false;
    } else if (event == Event::key && depth == 1) {
      key_ = parsed.is_string() ? parsed.get<std::string>() : "";
    } else if (event == Event::value && depth == 1 && key_ == "displayTimeUnit" && error_.ok()) {
      error_ = CheckDisplayTimeUnit(parsed);
    }
    return true;
  }

  // The container error, if any, once parsing is over.
  absl::Status Result() const {
    if (!error_.ok()) return error_;
    if (!saw_events_) return absl::InvalidArgumentError(kContainerError);
    return absl::OkStatus();
  }

 private:
  ChromeTraceChecker* checker_;
  absl::Status error_;
  std::string key_;  // the latest key of the root object
  bool in_events_ = false;
  bool saw_events_ = false;
  int element_depth_ = -1;
};

// nlohmann's messages quote the input they stopped at; bytes outside
// printable ASCII are shown as <XX> so that a message is valid UTF-8.
std::string Printable(absl::string_view text) {
  std::string out;
  for (char c : text) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, absl::StrFormat("<%02X>", byte));
    }
  }
  return out;
}

absl::Status PrefixPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

}  // namespace

ChromeTraceChecker::ChromeTraceChecker() : rules_(std::make_unique<TraceRules>()) {}
ChromeTraceChecker::~ChromeTraceChecker() = default;

void ChromeTraceChecker::AddEvent(const nlohmann::json& event) { rules_->AddEvent(event); }

absl::StatusOr<ChromeTraceSummary> ChromeTraceChecker::Finish() { return rules_->Finish(); }

absl::StatusOr<ChromeTraceSummary> CheckChromeTrace(const nlohmann::json& trace) {
  const nlohmann::json* events = &trace;
  if (trace.is_object()) {
    auto it = trace.find("traceEvents");
    if (it == trace.end() || !it->is_array()) {
      return absl::InvalidArgumentError(kContainerError);
    }
    events = &*it;
    if (auto unit = trace.find("displayTimeUnit"); unit != trace.end()) {
      if (absl::Status valid = CheckDisplayTimeUnit(*unit); !valid.ok()) return valid;
    }
  } else if (!trace.is_array()) {
    return absl::InvalidArgumentError(kContainerError);
  }
  ChromeTraceChecker checker;
  for (const nlohmann::json& event : *events) checker.AddEvent(event);
  return checker.Finish();
}

absl::StatusOr<ChromeTraceSummary> ReadAndCheckChromeTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": cannot read: ", std::strerror(errno)));
  }
  ChromeTraceChecker checker;
  StreamingContainer container(&checker);
  try {
    nlohmann::json rest = nlohmann::json::parse(
        in, [&container](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return container.OnEvent(depth, event, parsed);
        });
  } catch (const nlohmann::json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, ..."
    std::string what = e.what();
    size_t bracket = what.find("] ");
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": invalid JSON: ",
                     Printable(bracket == std::string::npos ? what : what.substr(bracket + 2))));
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat(path, ": read error"));
  if (absl::Status container_status = container.Result(); !container_status.ok()) {
    return PrefixPath(path, container_status);
  }
  absl::StatusOr<ChromeTraceSummary> summary = checker.Finish();
  if (!summary.ok()) return PrefixPath(path, summary.status());
  return summary;
}

}  // namespace jitpipe
