// CheckChromeTrace: validates a Chrome Trace Event JSON trace against the
// rules of Perfetto's JSON importer (and of the DevTools trace engine where
// it is stricter), so that a trace that passes loads in both viewers without
// dropped events, overflow tracks or lost arrows.
//
// The rules (from the project's ecosystem notes §1.2 and §1.5, Perfetto's
// src/trace_processor/importers/json/ and the DevTools FlowsHandler):
//   container  a JSON array of events, or an object whose "traceEvents" is
//              one; "displayTimeUnit", when present, is "ms" or "ns".
//   every      an object with "ph" (one of X B E i I C s f b e n M), "name"
//   event      (a string), "pid" and "tid" (integers in [0, 2^32 - 1]); "cat"
//              and "args", when present, are a string and an object; "ts" is
//              a finite number >= 0 (optional on M only).
//   X          "dur" is a finite number >= 0.
//   B / E      balanced LIFO per (pid, tid) in ts order, each E with the
//              same name and cat as its B.
//   slices     X and B/E slices nest strictly per (pid, tid): two slices that
//              overlap without one containing the other are an error.
//   C          "args" is a non-empty object of finite numbers.
//   i / I      "s", when present, is "t", "p" or "g".
//   s / f      "id" is an integer in [0, 2^64) or a hex string; an f has
//              "bp": "e". Each (id, cat, name) has exactly one s and one f,
//              the s earlier in the file and earlier in time. Each flow event
//              binds to a slice: exactly one slice on its (pid, tid) starts
//              at its ts, it has the flow's cat and comes earlier in the file.
//              (DevTools binds a flow event only to a slice with equal ts,
//              pid, tid and cat; Perfetto binds "s" to the slice open at its
//              ts and "f" + "bp":"e" to the enclosing one; this placement
//              satisfies both.)
//   b / e / n  an "id", or an "id2" with "local" or "global".
//   M          "name" is process_name or thread_name (args.name a string) or
//              process_sort_index or thread_sort_index (args.sort_index an
//              integer).
// Times are compared in integer nanoseconds, rounded as Perfetto rounds them.
//
// Errors are InvalidArgument naming the event by its index in traceEvents
// and the rule, e.g.
//   event 7 (ph "X", name "b"): slice [3, 8) us on pid 0 tid 1 overlaps
//   event 4 (name "a", [1, 5) us) without nesting
// Per-event rules report the first failing event in file order; the rules
// that need the whole trace (B/E balance, nesting, flows) are checked after
// it, thread by thread in (pid, tid) order.
#ifndef JITPIPE_TRACES_TRACE_CHECKER_H_
#define JITPIPE_TRACES_TRACE_CHECKER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace jitpipe {

class TraceRules;  // traces/trace_rules.h

// What a valid trace contains.
struct ChromeTraceSummary {
  int64_t events = 0;
  int64_t slices = 0;       // X events plus matched B/E pairs
  int64_t counters = 0;     // C events
  int64_t flows = 0;        // matched s/f pairs
  int64_t instants = 0;     // i / I events
  int64_t metadata = 0;     // M events
  int64_t end_nanos = 0;    // the latest ts or slice end, in nanoseconds
};

// Checks a parsed trace. Errors: InvalidArgument as above.
absl::StatusOr<ChromeTraceSummary> CheckChromeTrace(const nlohmann::json& trace);

// Reads and checks a trace file, streaming: events are parsed and checked one
// at a time, so memory grows with the number of slices (about 40 bytes
// each), not with the file. Errors: NotFound / Unavailable for I/O;
// InvalidArgument "<path>: <what>" for invalid JSON (with line and column),
// nesting deeper than kMaxJsonDepth, or a broken rule.
absl::StatusOr<ChromeTraceSummary> ReadAndCheckChromeTrace(const std::string& path);

// The incremental checker behind both functions, for callers that produce
// events one by one. Errors are sticky: after the first failure further
// events are ignored and Finish() returns it.
// Thread safety: one thread at a time.
class ChromeTraceChecker {
 public:
  ChromeTraceChecker();
  ChromeTraceChecker(const ChromeTraceChecker&) = delete;
  ChromeTraceChecker& operator=(const ChromeTraceChecker&) = delete;
  ~ChromeTraceChecker();

  // Checks the per-event rules for the next element of traceEvents.
  void AddEvent(const nlohmann::json& event);

  // Checks the whole-trace rules. REQUIRES: called once, after all events.
  absl::StatusOr<ChromeTraceSummary> Finish();

 private:
  std::unique_ptr<TraceRules> rules_;
};

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_TRACE_CHECKER_H_
