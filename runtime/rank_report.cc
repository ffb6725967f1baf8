#include "runtime/rank_report.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "nlohmann/json.hpp"

namespace jitpipe {
namespace {

using Json = nlohmann::json;

// Spans as [rank, track, index, transfer, start_us, end_us]; memory samples
// as [rank, time_us, [bytes by category]].
Json EncodeTimeline(const Timeline& timeline) {
  Json spans = Json::array();
  for (const TimelineSpan& s : timeline.spans) {
    spans.push_back({s.rank, static_cast<int>(s.track), s.index, s.transfer, s.start_us, s.end_us});
  }
  Json memory = Json::array();
  for (const MemorySample& m : timeline.memory) memory.push_back({m.rank, m.time_us, m.bytes});
  return {{"spans", std::move(spans)}, {"memory", std::move(memory)}};
}

Timeline DecodeTimeline(const Json& j) {
  Timeline timeline;
  for (const Json& s : j.at("spans")) {
    timeline.spans.push_back({s.at(0).get<int32_t>(),
                              static_cast<TimelineTrack>(s.at(1).get<int>()),
                              s.at(2).get<int32_t>(), s.at(3).get<int32_t>(), s.at(4).get<double>(),
                              s.at(5).get<double>()});
  }
  for (const Json& m : j.at("memory")) {
    MemorySample sample;
    sample.rank = m.at(0).get<int32_t>();
    sample.time_us = m.at(1).get<double>();
    sample.bytes = m.at(2).get<std::array<int64_t, kNumMemoryCategories>>();
    timeline.memory.push_back(sample);
  }
  return timeline;
}

// Runs `decode` and turns a JSON error (parse, missing key, wrong type)
// into InvalidArgument.
template <typename T, typename F>
absl::StatusOr<T> Decode(absl::string_view what, absl::string_view text, F decode) {
  try {
    return decode(Json::parse(text.begin(), text.end()));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ", what, ": ", e.what()));
  }
}

}  // namespace

std::string EncodeRankOutcome(const RankOutcome& outcome) {
  Json steps = Json::array();
  for (const StepResult& r : outcome.steps) {
    steps.push_back({{"loss", r.loss},
                     {"start_us", r.start_us},
                     {"compute_end_us", r.compute_end_us},
                     {"end_us", r.end_us},
                     {"exposed_reduce_us", r.exposed_reduce_us},
                     {"peak_bytes", r.peak_bytes},
                     {"timeline", EncodeTimeline(r.timeline)}});
  }
  return Json{{"steps", std::move(steps)},
              {"peak_bytes", outcome.peak_bytes},
              {"heap_allocations", outcome.heap_allocations},
              {"allocator_peak_bytes", outcome.allocator_peak_bytes}}
      .dump();
}

absl::StatusOr<RankOutcome> DecodeRankOutcome(absl::string_view text) {
  return Decode<RankOutcome>("rank outcome", text, [](const Json& j) {
    RankOutcome outcome;
    outcome.peak_bytes = j.at("peak_bytes").get<int64_t>();
    outcome.heap_allocations = j.at("heap_allocations").get<int64_t>();
    outcome.allocator_peak_bytes = j.value("allocator_peak_bytes", int64_t{-1});
    for (const Json& s : j.at("steps")) {
      StepResult r;
      r.loss = s.at("loss").get<double>();
      r.start_us = s.at("start_us").get<double>();
      r.compute_end_us = s.at("compute_end_us").get<double>();
      r.end_us = s.at("end_us").get<double>();
      r.exposed_reduce_us = s.at("exposed_reduce_us").get<double>();
      r.peak_bytes = s.at("peak_bytes").get<int64_t>();
      r.timeline = DecodeTimeline(s.at("timeline"));
      outcome.steps.push_back(std::move(r));
    }
    return outcome;
  });
}

std::string EncodeRankFailure(const RankFailure& failure) {
  return Json{{"world_rank", failure.world_rank},
              {"code", static_cast<int>(failure.status.code())},
              {"message", std::string(failure.status.message())},
              {"failed_at_us", failure.failed_at_us},
              {"record", failure.record},
              {"dump_error", failure.dump_error},
              {"stuck", failure.stuck}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<RankFailure> DecodeRankFailure(absl::string_view text) {
  return Decode<RankFailure>("rank failure", text, [](const Json& j) {
    RankFailure failure;
    failure.world_rank = j.at("world_rank").get<int>();
    failure.status = absl::Status(static_cast<absl::StatusCode>(j.at("code").get<int>()),
                                  j.at("message").get<std::string>());
    failure.failed_at_us = j.at("failed_at_us").get<double>();
    failure.record = j.at("record").get<std::string>();
    failure.dump_error = j.at("dump_error").get<std::string>();
    failure.stuck = j.at("stuck").get<bool>();
    return failure;
  });
}

int RootFailure(const RankFailures& failures) {
  int root = 0;
  auto earlier = [&](int w) {
    const RankFailure& a = *failures[w];
    const RankFailure& b = *failures[root];
    const bool a_cause = a.status.code() != absl::StatusCode::kAborted && !a.stuck;
    const bool b_cause = b.status.code() != absl::StatusCode::kAborted && !b.stuck;
    return a_cause != b_cause ? a_cause : a.failed_at_us < b.failed_at_us;
  };
  for (int w = 1; w < static_cast<int>(failures.size()); ++w) {
    if (failures[w].has_value() && earlier(w)) root = w;
  }
  return root;
}

std::string HowOthersStopped(const RankFailures& failures, int root) {
  std::vector<int> aborted, timed_out, failed, stuck, silent;
  for (int w = 0; w < static_cast<int>(failures.size()); ++w) {
    if (w == root) continue;
    if (!failures[w].has_value()) {
      silent.push_back(w);
      continue;
    }
    if (failures[w]->stuck) {
      stuck.push_back(w);
      continue;
    }
    const absl::StatusCode code = failures[w]->status.code();
    if (code == absl::StatusCode::kAborted) {
      aborted.push_back(w);
    } else if (code == absl::StatusCode::kDeadlineExceeded) {
      timed_out.push_back(w);
    } else {
      failed.push_back(w);
    }
  }
  std::vector<std::string> parts;
  auto add = [&](absl::string_view how, const std::vector<int>& ranks) {
    if (!ranks.empty()) parts.push_back(absl::StrCat(how, " (", absl::StrJoin(ranks, ", "), ")"));
  };
  add("aborted", aborted);
  add("timed out", timed_out);
  add("failed", failed);
  add("stuck in a stage call", stuck);
  add("no report, died or did not answer", silent);
  return absl::StrJoin(parts, ", ");
}

std::string KeepRecords(const RankFailures& failures, const std::string& dir,
                        const std::vector<int>& dumped_here, std::vector<FlightRecord>& records) {
  std::vector<std::string> unwritten;
  for (int w = 0; w < static_cast<int>(failures.size()); ++w) {
    if (!failures[w].has_value()) continue;
    const RankFailure& f = *failures[w];
    absl::StatusOr<FlightRecord> record = ParseFlightRecord(f.record);
    if (record.ok()) records.push_back(*std::move(record));
    absl::Status written;
    if (dir.empty()) {
      // nothing is kept on disk
    } else if (!std::binary_search(dumped_here.begin(), dumped_here.end(), w)) {
      written = WriteFileAtomically(absl::StrCat(dir, "/rank_", w, ".json"), f.record);
    } else if (!f.dump_error.empty()) {  // dumped by its own rank
      written = absl::UnavailableError(f.dump_error);
    }
    if (!written.ok()) unwritten.push_back(absl::StrCat(w, " (", written.message(), ")"));
  }
  return absl::StrJoin(unwritten, ", ");
}

}  // namespace jitpipe
