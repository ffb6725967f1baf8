// TraceRules: the rules listed in trace_checker.h, as an incremental checker.
// Implementation detail of ChromeTraceChecker (include trace_checker.h
// instead); tested through it.
//
// AddEvent applies the per-event rules at once and keeps what the
// whole-trace rules need: per (pid, tid) the slices, B/E marks and flow
// events as small records with interned names; per flow key its s and f.
// Finish applies the whole-trace rules thread by thread in (pid, tid) order.
//
// Thread safety: one thread at a time.
#ifndef JITPIPE_TRACES_TRACE_RULES_H_
#define JITPIPE_TRACES_TRACE_RULES_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "traces/trace_checker.h"

namespace jitpipe {

class TraceRules {
 public:
  // Sticky: after the first error further events are counted but not checked.
  void AddEvent(const nlohmann::json& event);
  // REQUIRES: called once.
  absl::StatusOr<ChromeTraceSummary> Finish();

 private:
  // An X event, or a B/E pair once matched. Times in nanoseconds.
  struct Slice {
    int64_t begin;
    int64_t end;
    int64_t index;  // of the X or B event
    uint32_t name;
    uint32_t cat;
    char ph;
  };
  // A B, E, s or f event on a thread.
  struct Mark {
    int64_t ts;
    int64_t index;
    uint32_t name;
    uint32_t cat;
    char ph;
  };
  struct Thread {
    std::vector<Slice> slices;
    std::vector<Mark> begin_end;  // B and E events
    std::vector<Mark> flow_events;  // s and f events
  };
  // The s and f of one flow key (id, cat, name); index -1 when absent.
  struct Flow {
    uint64_t id;
    uint32_t cat;
    uint32_t name;
    int64_t start_index = -1;
    int64_t start_ts = 0;
    int64_t end_index = -1;
    int64_t end_ts = 0;
  };
  // What every event has once its common fields are valid.
  struct Header {
    int64_t index;
    char ph;
    uint64_t thread;  // pid << 32 | tid
    uint32_t name;
    uint32_t cat;
    int64_t ts;
  };

  absl::Status CheckEvent(const nlohmann::json& event, int64_t index);
  absl::Status CheckHeader(const nlohmann::json& event, Header* header);
  absl::Status CheckByPhase(const nlohmann::json& event, const Header& header);
  absl::Status CheckCounter(const nlohmann::json& event, const Header& header);
  absl::Status CheckFlowEvent(const nlohmann::json& event, const Header& header);
  absl::Status CheckMetadata(const nlohmann::json& event, const Header& header);

  absl::Status MatchBeginEnd(uint64_t thread_key, Thread& thread);
  absl::Status CheckNesting(uint64_t thread_key, Thread& thread);
  absl::Status CheckFlowPairs() const;
  absl::Status CheckFlowBindings(uint64_t thread_key, const Thread& thread) const;

  uint32_t Intern(absl::string_view text);
  // "event 7 (ph "X", name "a")" for error messages.
  std::string Describe(int64_t index, char ph, uint32_t name) const;
  absl::Status Error(int64_t index, char ph, uint32_t name, absl::string_view what) const;

  absl::Status status_;
  ChromeTraceSummary summary_;
  absl::flat_hash_map<uint64_t, Thread> threads_;
  absl::flat_hash_map<std::tuple<uint64_t, uint32_t, uint32_t>, size_t> flow_by_key_;
  std::vector<Flow> flows_;  // in order of first appearance
  absl::flat_hash_map<std::string, uint32_t> string_ids_;
  std::vector<std::string> strings_;
};

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_TRACE_RULES_H_
