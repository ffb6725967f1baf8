#include "comm/flight_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "nlohmann/json.hpp"

namespace jitpipe {

absl::string_view FlightOpKindName(FlightOpKind kind) {
  switch (kind) {
    case FlightOpKind::kSend:
      return "send";
    case FlightOpKind::kRecv:
      return "recv";
    case FlightOpKind::kAllReduce:
      return "all_reduce";
    case FlightOpKind::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

absl::string_view FlightOpStateName(FlightOpState state) {
  switch (state) {
    case FlightOpState::kPosted:
      return "posted";
    case FlightOpState::kCompleted:
      return "completed";
    case FlightOpState::kFailed:
      return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(int rank, int world_size, size_t capacity)
    : rank_(rank), world_size_(world_size), capacity_(capacity), start_(absl::Now()) {}

double FlightRecorder::NowUs() const { return absl::ToDoubleMicroseconds(absl::Now() - start_); }

uint64_t FlightRecorder::RecordPost(FlightOpKind kind, int peer, const std::vector<int>& group,
                                    uint64_t tag, int64_t bytes, const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  FlightEntry e;
  e.seq = next_seq_++;
  e.kind = kind;
  e.peer = peer;
  e.group = group;
  e.tag = tag;
  e.bytes = bytes;
  e.peer_seq = group.empty() ? peer_seq_[{static_cast<int>(kind), peer}]++ : group_seq_[group]++;
  e.info = info;
  e.posted_us = NowUs();
  entries_.push_back(std::move(e));
  if (entries_.size() > capacity_) entries_.pop_front();
  return next_seq_ - 1;
}

void FlightRecorder::RecordDone(uint64_t seq, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (entries_.empty() || seq < entries_.front().seq) return;
  size_t at = seq - entries_.front().seq;
  if (at >= entries_.size()) return;
  FlightEntry& e = entries_[at];
  e.state = status.ok() ? FlightOpState::kCompleted : FlightOpState::kFailed;
  e.completed_us = NowUs();
  if (!status.ok()) e.error = std::string(status.message());
}

void FlightRecorder::SetPosition(int program_index, const std::string& action) {
  absl::MutexLock lock(&mu_);
  position_index_ = program_index;
  position_action_ = action;
}

std::vector<FlightEntry> FlightRecorder::Entries() const {
  absl::MutexLock lock(&mu_);
  return {entries_.begin(), entries_.end()};
}

absl::string_view FlightMatchingName(FlightMatching matching) {
  return matching == FlightMatching::kByTag ? "tag" : "order";
}

void FlightRecorder::SetMatching(FlightMatching matching) {
  absl::MutexLock lock(&mu_);
  matching_ = matching;
}

std::string FlightRecorder::ToJson(absl::string_view reason) const {
  absl::MutexLock lock(&mu_);
  nlohmann::json doc = {{"format", std::string(kFlightRecordFormat)},
                        {"version", kFlightRecordVersion},
                        {"rank", rank_},
                        {"world_size", world_size_},
                        {"matching", std::string(FlightMatchingName(matching_))},
                        {"reason", std::string(reason)},
                        {"dumped_us", NowUs()},
                        {"position", {{"index", position_index_}, {"action", position_action_}}}};
  nlohmann::json& list = doc["entries"] = nlohmann::json::array();
  for (const FlightEntry& e : entries_) {
    nlohmann::json j = {{"seq", e.seq},
                        {"kind", std::string(FlightOpKindName(e.kind))},
                        {"tag", e.tag},
                        {"bytes", e.bytes},
                        {"peer_seq", e.peer_seq},
                        {"stage", e.info.stage},
                        {"microbatch", e.info.microbatch},
                        {"index", e.info.program_index},
                        {"action", e.info.action},
                        {"state", std::string(FlightOpStateName(e.state))},
                        {"posted_us", e.posted_us},
                        {"completed_us", e.completed_us}};
    if (e.group.empty()) {
      j["peer"] = e.peer;
    } else {
      j["group"] = e.group;
    }
    if (!e.error.empty()) j["error"] = e.error;
    list.push_back(std::move(j));
  }
  return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

absl::Status FlightRecorder::Dump(const std::string& dir, absl::string_view reason) const {
  return WriteFileAtomically(absl::StrCat(dir, "/rank_", rank_, ".json"), ToJson(reason));
}

absl::StatusOr<RequestId> RecordingTransport::Remember(absl::StatusOr<RequestId> id,
                                                       uint64_t seq) {
  if (!id.ok()) {
    recorder_->RecordDone(seq, id.status());
    return id;
  }
  absl::MutexLock lock(&mu_);
  seq_of_[*id] = seq;
  return id;
}

absl::StatusOr<RequestId> RecordingTransport::PostSend(int peer, uint64_t tag,
                                                       absl::Span<const std::byte> bytes,
                                                       const OpInfo& info) {
  uint64_t seq = recorder_->RecordPost(FlightOpKind::kSend, peer, {}, tag,
                                       static_cast<int64_t>(bytes.size()), info);
  return Remember(inner_->PostSend(peer, tag, bytes, info), seq);
}

absl::StatusOr<RequestId> RecordingTransport::PostRecv(int peer, uint64_t tag,
                                                       absl::Span<std::byte> bytes,
                                                       const OpInfo& info) {
  uint64_t seq = recorder_->RecordPost(FlightOpKind::kRecv, peer, {}, tag,
                                       static_cast<int64_t>(bytes.size()), info);
  return Remember(inner_->PostRecv(peer, tag, bytes, info), seq);
}

absl::StatusOr<RequestId> RecordingTransport::PostAllReduce(const Group& group,
                                                            absl::Span<float> data, ReduceOp op,
                                                            const OpInfo& info) {
  uint64_t seq = recorder_->RecordPost(FlightOpKind::kAllReduce, -1, group.ranks, 0,
                                       static_cast<int64_t>(data.size() * sizeof(float)), info);
  return Remember(inner_->PostAllReduce(group, data, op, info), seq);
}

absl::StatusOr<RequestId> RecordingTransport::PostReduceScatter(const Group& group,
                                                                absl::Span<const float> input,
                                                                absl::Span<float> output,
                                                                ReduceOp op, const OpInfo& info) {
  uint64_t seq = recorder_->RecordPost(FlightOpKind::kReduceScatter, -1, group.ranks, 0,
                                       static_cast<int64_t>(input.size() * sizeof(float)), info);
  return Remember(inner_->PostReduceScatter(group, input, output, op, info), seq);
}

absl::StatusOr<bool> RecordingTransport::Test(RequestId request) {
  absl::StatusOr<bool> done = inner_->Test(request);
  if (done.ok() && !*done) return done;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = seq_of_.find(request);
    if (it == seq_of_.end()) return done;
    seq = it->second;
    seq_of_.erase(it);
  }
  recorder_->RecordDone(seq, done.status());
  return done;
}

absl::Status RecordingTransport::Wait(RequestId request, absl::Duration timeout) {
  absl::Status status = inner_->Wait(request, timeout);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) return status;  // still pending
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = seq_of_.find(request);
    if (it == seq_of_.end()) return status;
    seq = it->second;
    seq_of_.erase(it);
  }
  recorder_->RecordDone(seq, status);
  return status;
}

}  // namespace jitpipe
