// The flight recorder: a per-rank ring of the last transport operations, for
// diagnosing hangs after the fact (PyTorch's NCCL flight recorder, made
// pipeline-aware: every entry names the stage, microbatch and program index).
//
// Each entry records the operation (send, receive, all-reduce,
// reduce-scatter), the peer or group, tag and bytes, the per-peer sequence
// number (the k-th send from A to B pairs with the k-th receive at B from A,
// even after the ring has dropped older entries), the OpInfo, its state
// (posted, completed, failed) and times. The rank's current program position
// is recorded too, so a dump says where a rank stands even when it is
// blocked in compute rather than in the transport.
//
// On a timeout every rank writes its record as JSON ("jitpipe.flight_record",
// version 1) to DIR/rank_<r>.json, whole or absent (temp file + rename);
// `jitpipe fr-analyze DIR` (flight_analysis.h) pairs them.
//
// Thread safety: all methods may be called concurrently.
#ifndef JITPIPE_COMM_FLIGHT_RECORDER_H_
#define JITPIPE_COMM_FLIGHT_RECORDER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/transport.h"

namespace jitpipe {

inline constexpr absl::string_view kFlightRecordFormat = "jitpipe.flight_record";
inline constexpr int kFlightRecordVersion = 1;

enum class FlightOpKind { kSend, kRecv, kAllReduce, kReduceScatter };

// How the transport pairs a receive with a send, written in the record so
// that fr-analyze pairs entries by the same rule: by tag (in-process, MPI:
// a receive posted out of order still finds its send, as --recv jit posts
// them) or in posting order per pair of ranks (NCCL).
enum class FlightMatching { kByTag, kByOrder };
absl::string_view FlightMatchingName(FlightMatching matching);
enum class FlightOpState { kPosted, kCompleted, kFailed };

absl::string_view FlightOpKindName(FlightOpKind kind);
absl::string_view FlightOpStateName(FlightOpState state);

struct FlightEntry {
  uint64_t seq = 0;       // per rank, from 0
  FlightOpKind kind = FlightOpKind::kSend;
  int peer = -1;          // point-to-point only
  std::vector<int> group; // collectives only
  uint64_t tag = 0;
  int64_t bytes = 0;
  uint64_t peer_seq = 0;  // k-th op of this direction with this peer / group
  OpInfo info;
  FlightOpState state = FlightOpState::kPosted;
  double posted_us = 0;     // since the recorder was created
  double completed_us = -1;
  std::string error;
};

class FlightRecorder {
 public:
  FlightRecorder(int rank, int world_size, size_t capacity = 4096);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  int rank() const { return rank_; }

  // Records a posted operation and returns its seq.
  uint64_t RecordPost(FlightOpKind kind, int peer, const std::vector<int>& group, uint64_t tag,
                      int64_t bytes, const OpInfo& info);
  // Marks an operation completed (ok) or failed. Unknown or evicted seqs are
  // ignored.
  void RecordDone(uint64_t seq, const absl::Status& status);
  // Where the rank's program stands: the index and action it is executing.
  void SetPosition(int program_index, const std::string& action);

  // The transport's pairing rule (default: by tag).
  void SetMatching(FlightMatching matching);

  std::vector<FlightEntry> Entries() const;

  // The record as JSON text; `reason` says why it was dumped.
  std::string ToJson(absl::string_view reason) const;
  // Writes DIR/rank_<rank>.json atomically.
  absl::Status Dump(const std::string& dir, absl::string_view reason) const;

 private:
  double NowUs() const;

  const int rank_;
  const int world_size_;
  const size_t capacity_;
  const absl::Time start_;

  mutable absl::Mutex mu_;
  std::deque<FlightEntry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Next per-peer sequence by (kind, peer), and per group for collectives.
  absl::flat_hash_map<std::pair<int, int>, uint64_t> peer_seq_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::vector<int>, uint64_t> group_seq_ ABSL_GUARDED_BY(mu_);
  FlightMatching matching_ ABSL_GUARDED_BY(mu_) = FlightMatching::kByTag;
  int position_index_ ABSL_GUARDED_BY(mu_) = -1;
  std::string position_action_ ABSL_GUARDED_BY(mu_);
};

// A Transport that records every operation of `inner` in `recorder`.
// Borrows both; they must outlive it.
class RecordingTransport final : public Transport {
 public:
  RecordingTransport(Transport* inner, FlightRecorder* recorder)
      : inner_(inner), recorder_(recorder) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data, ReduceOp op,
                                          const OpInfo& info) override;
  absl::StatusOr<RequestId> PostReduceScatter(const Group& group, absl::Span<const float> input,
                                              absl::Span<float> output, ReduceOp op,
                                              const OpInfo& info) override;
  absl::StatusOr<bool> Test(RequestId request) override;
  absl::Status Wait(RequestId request, absl::Duration timeout) override;
  const DeviceStreams* device_streams() const override { return inner_->device_streams(); }
  absl::StatusOr<bool> StreamWait(RequestId request, void* stream) override {
    return inner_->StreamWait(request, stream);
  }
  // Not recorded: a marker is no transfer.
  absl::StatusOr<RequestId> PostMarker(const OpInfo& info) override {
    return inner_->PostMarker(info);
  }
  void GroupStart() override { inner_->GroupStart(); }
  absl::Status GroupEnd() override { return inner_->GroupEnd(); }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }
  int64_t InFlightBytes() const override { return inner_->InFlightBytes(); }
  int64_t PeakInFlightBytes() const override { return inner_->PeakInFlightBytes(); }

 private:
  absl::StatusOr<RequestId> Remember(absl::StatusOr<RequestId> id, uint64_t seq);

  Transport* const inner_;
  FlightRecorder* const recorder_;
  absl::Mutex mu_;
  absl::flat_hash_map<RequestId, uint64_t> seq_of_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_FLIGHT_RECORDER_H_
