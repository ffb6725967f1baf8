// ChromeTraceWriter: streams a Chrome Trace Event JSON file that both the
// Perfetto UI and Chrome DevTools load.
//
// Every jitpipe timeline (memory plan, simulation, runtime replay, flight
// record) is written through this class. It is a streaming writer: each event
// is formatted and handed to the sink as soon as it is added (through a
// buffer of ChromeTraceOptions::buffer_bytes), so a trace of millions of
// events never sits in memory.
//
// Output (object form; the event order is the call order):
//
//   {"traceEvents":[
//   {"name":"process_name","cat":"__metadata","ph":"M","ts":0,"pid":0,"tid":0,"args":{"name":"rank 0"}},
//   {"name":"0F1","cat":"compute","ph":"X","ts":3.5,"pid":0,"tid":1,"dur":2,"args":{"mb":1}},
//   {"name":"0SEND_F1","cat":"p2p","ph":"X","ts":5.5,"pid":0,"tid":2,"dur":0.25},
//   {"name":"act s0->s1 mb1","cat":"p2p","ph":"s","ts":5.5,"pid":0,"tid":2,"id":7},
//   {"name":"mem.activations","cat":"memory","ph":"C","ts":5.5,"pid":0,"tid":0,"args":{"bytes":1048576}},
//   ...
//   ],
//   "otherData":{"format":"jitpipe.trace","version":1,"ts_offset_us":1,...caller metadata}}
//
// Time. `ts_us` and `dur_us` are microseconds relative to the start of the
// run (JSON trace times are always microseconds; no displayTimeUnit is
// written). Absolute clocks are refused (see kMaxTraceTimeUs): viewers keep
// times as JavaScript doubles and lose precision on large values. The writer
// adds ChromeTraceOptions::ts_offset_us (default 1 us) to every timed event
// and records it in otherData, because the DevTools trace engine leaves
// events at ts == 0 out of the trace bounds (a slice starting at 0 would be
// cut off); metadata events are written at ts 0, outside the bounds. Times
// are written with nanosecond resolution, the resolution Perfetto stores:
// start and end of a slice are each rounded to the nanosecond and the
// written dur is their difference, so slices that nest before rounding still
// nest afterwards.
//
// Every event carries name, cat, ph, ts, pid and tid; pid and tid are
// non-negative integers. Strings are JSON-escaped, and invalid UTF-8 is
// replaced by U+FFFD (never an error).
//
// Errors are sticky, as in leveldb's TableBuilder: Add*/Set* return nothing;
// the first invalid event is kept in status(), that event and all later
// calls are dropped, and Finish() returns the error without producing the
// file. Messages name the event by the index it would have had in
// traceEvents:
//   trace event 12 (ph "X", name "0F1"): dur_us is nan; times must be finite and >= 0
// Failures of the file itself (disk full) surface in Finish() as Unavailable.
// The writer checks each event on its own. Rules that span events (strict
// nesting per thread, each flow start matched by one end) are the caller's;
// CheckChromeTrace (trace_checker.h) verifies them on a finished trace.
//
// Thread safety: a ChromeTraceWriter is used by one thread at a time;
// callers that trace from several threads serialize the calls.
#ifndef JITPIPE_TRACES_CHROME_TRACE_WRITER_H_
#define JITPIPE_TRACES_CHROME_TRACE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace jitpipe {

inline constexpr absl::string_view kTraceFormat = "jitpipe.trace";
inline constexpr int kTraceVersion = 1;

// The largest ts or ts + dur accepted, in microseconds (about 104 days). In
// nanoseconds it stays below 2^53, so JavaScript viewers keep every
// nanosecond exact.
inline constexpr double kMaxTraceTimeUs = 9.0e12;

// The largest flow id accepted: 2^53 - 1, the largest integer a JavaScript
// viewer reads exactly.
inline constexpr int64_t kMaxTraceFlowId = (int64_t{1} << 53) - 1;

// One entry of an event's "args" object. A TraceArg is a view: the key and a
// string value are borrowed for the duration of the call that takes it.
// Integers are written as int64 (an unsigned value above INT64_MAX wraps);
// doubles must be finite. Keys should be unique within one event.
class TraceArg {
 public:
  enum class Kind { kInt, kDouble, kBool, kString };

  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  TraceArg(absl::string_view key, T value)
      : key_(key), kind_(Kind::kInt), int_(static_cast<int64_t>(value)) {}
  TraceArg(absl::string_view key, double value)
      : key_(key), kind_(Kind::kDouble), double_(value) {}
  TraceArg(absl::string_view key, bool value) : key_(key), kind_(Kind::kBool), bool_(value) {}
  TraceArg(absl::string_view key, absl::string_view value)
      : key_(key), kind_(Kind::kString), string_(value) {}
  TraceArg(absl::string_view key, const char* value)
      : TraceArg(key, absl::string_view(value)) {}

  absl::string_view key() const { return key_; }
  Kind kind() const { return kind_; }
  int64_t int_value() const { return int_; }
  double double_value() const { return double_; }
  bool bool_value() const { return bool_; }
  absl::string_view string_value() const { return string_; }

 private:
  absl::string_view key_;
  Kind kind_;
  int64_t int_ = 0;
  double double_ = 0;
  bool bool_ = false;
  absl::string_view string_;
};

// One arrow between two slices (a Chrome "v1" flow). The arrow's key is
// (id, the slices' cat, name): give the sending and the receiving slice the
// same cat, and give every arrow its own id (0 to kMaxTraceFlowId).
struct TraceFlow {
  absl::string_view name = {};
  int64_t id = 0;
};

// A complete slice (ph "X") on thread (pid, tid).
//
// flow_out / flow_in draw an arrow from this slice / into this slice. The
// writer emits the flow event right after the slice, on the same pid, tid,
// ts and cat: the DevTools engine binds a flow event only to a slice with
// exactly that (ts, pid, tid, cat), and Perfetto binds "s" to the slice open
// at its ts and "f" with "bp":"e" to the enclosing slice. Obligations for the
// arrow to render in both (CheckChromeTrace enforces them): the sending
// slice is added before, and starts strictly earlier than, the receiving
// one, and no other slice on either thread starts at the same ts.
struct TraceSlice {
  absl::string_view name = {};
  absl::string_view cat = {};
  int pid = 0;
  int tid = 0;
  double ts_us = 0;
  double dur_us = 0;
  absl::Span<const TraceArg> args = {};  // borrowed for the call
  std::optional<TraceFlow> flow_out = std::nullopt;
  std::optional<TraceFlow> flow_in = std::nullopt;
};

// One sample of a counter (ph "C"), written with a single key:
// {"name":"mem.activations","ph":"C",...,"args":{"bytes":1048576}}.
// Perfetto shows it as the process-scoped track "<name> <key>" (one track per
// key, so one key per event keeps the track names predictable). A counter is
// a step function: sample at every change and once more at the end of the
// run, or the last step has no visible width.
struct TraceCounter {
  absl::string_view name = {};
  absl::string_view cat = {};
  int pid = 0;
  int tid = 0;
  double ts_us = 0;
  absl::string_view key = {};  // non-empty
  double value = 0;       // finite
};

enum class TraceInstantScope { kThread, kProcess, kGlobal };  // "s": "t", "p", "g"

// A zero-duration marker (ph "i").
struct TraceInstant {
  absl::string_view name = {};
  absl::string_view cat = {};
  int pid = 0;
  int tid = 0;
  double ts_us = 0;
  TraceInstantScope scope = TraceInstantScope::kThread;
  absl::Span<const TraceArg> args = {};  // borrowed for the call
};

struct ChromeTraceOptions {
  // Added to every ts (see "Time" above). Must be finite and >= 0; 0 writes
  // the caller's times unchanged.
  double ts_offset_us = 1.0;
  // Formatted events are handed to the sink once this many bytes collect.
  size_t buffer_bytes = size_t{1} << 16;
};

class ChromeTraceWriter {
 public:
  // A writer whose trace goes to `path` atomically (base/atomic_file.h): the
  // bytes go to a temporary file next to `path`, renamed over it only by a
  // successful Finish(). A writer destroyed without Finish(), or whose
  // Finish() fails, leaves neither `path` nor a temporary file.
  // Errors: InvalidArgument for bad options or an empty path; Unavailable
  // when the directory is not writable.
  static absl::StatusOr<ChromeTraceWriter> ToFile(std::string path,
                                                  const ChromeTraceOptions& options = {});

  // A writer that appends the trace to `*out` (for tests and small traces).
  // `out` is borrowed and must outlive the writer; it holds the complete
  // trace after a successful Finish() and unspecified partial text otherwise.
  // Errors: InvalidArgument for bad options or a null `out`.
  static absl::StatusOr<ChromeTraceWriter> ToString(std::string* out,
                                                    const ChromeTraceOptions& options = {});

  ChromeTraceWriter(ChromeTraceWriter&& other) noexcept;
  ChromeTraceWriter& operator=(ChromeTraceWriter&& other) noexcept;
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;
  ~ChromeTraceWriter();

  // Event calls. Invalid input makes status() InvalidArgument (see above).
  // Calls after Finish(), or on a moved-from writer, are ignored.
  //
  // ts_us, dur_us: finite, >= 0, ts_us + dur_us <= kMaxTraceTimeUs.
  void AddSlice(const TraceSlice& slice);
  void AddCounter(const TraceCounter& counter);
  void AddInstant(const TraceInstant& instant);

  // Metadata events (ph "M", ts 0) naming and ordering the tracks. Viewers
  // use the last value written for a pid / (pid, tid).
  void SetProcessName(int pid, absl::string_view name);
  void SetThreadName(int pid, int tid, absl::string_view name);
  void SetProcessSortIndex(int pid, int sort_index);
  void SetThreadSortIndex(int pid, int tid, int sort_index);

  // Adds (or replaces) `key` in otherData, written by Finish() after the
  // events, so values known only at the end of a run (makespan, peak bytes)
  // can go there. Keys keep their first-set order. "format", "version" and
  // "ts_offset_us" are reserved; numbers inside `value` must be finite.
  void SetMetadata(absl::string_view key, nlohmann::json value);

  // Closes the JSON, writes otherData and commits the sink (renames the file
  // into place). Returns the first error of any earlier call, or Unavailable
  // when the sink fails; the file is then not produced.
  // Calling Finish() a second time returns FailedPrecondition.
  absl::Status Finish();

  // The sticky error so far (OkStatus while all calls succeeded).
  const absl::Status& status() const { return status_; }

  // Events written so far; the next event gets this index in traceEvents.
  int64_t events_written() const { return events_written_; }

 private:
  class Sink;
  class FileSink;
  class StringSink;

  ChromeTraceWriter(std::unique_ptr<Sink> sink, const ChromeTraceOptions& options);

  bool Accepting() const;
  bool CheckFiniteNonNegative(double us, absl::string_view field, absl::string_view ph,
                              absl::string_view name);
  // Validates a caller time and converts it to written nanoseconds (offset
  // added, rounded).
  bool ToNanos(double us, absl::string_view field, absl::string_view ph, absl::string_view name,
               int64_t* nanos);
  bool CheckTrack(int pid, int tid, absl::string_view ph, absl::string_view name);
  void Fail(absl::string_view ph, absl::string_view name, absl::string_view what);
  void BeginEvent(absl::string_view name, absl::string_view cat, char ph, int64_t ts_nanos,
                  int pid, int tid);
  void EndEvent();
  bool AppendArgs(absl::Span<const TraceArg> args, absl::string_view ph, absl::string_view name);
  void AppendFlow(const TraceSlice& slice, const TraceFlow& flow, int64_t ts_nanos, char ph);
  void AppendMetadataEvent(absl::string_view name, int pid, int tid, absl::string_view arg_key,
                           absl::string_view string_value, int int_value);
  void AppendOtherData();
  void FlushIfFull();

  std::unique_ptr<Sink> sink_;
  ChromeTraceOptions options_;
  std::string buffer_;
  absl::Status status_;
  int64_t events_written_ = 0;
  bool finished_ = false;
  std::vector<std::pair<std::string, nlohmann::json>> metadata_;
};

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_CHROME_TRACE_WRITER_H_
