#include "planning/recv_offsets.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "memory/buffer_lifetimes.h"
#include "memory/liveness.h"
#include "scheduler/passes/place_recvs_just_in_time.h"

namespace jitpipe {
namespace {

// One rank's program in slot space: the non-RECV actions, numbered as
// MessageIndex numbers consumers, the same in every placement. Index
// spaces: program index i of the just-in-time program; slot j; compute
// number q (computes[q] = slot of the q-th compute).
struct Slots {
  std::vector<int64_t> live;        // per slot: jit-planned live bytes during it
  std::vector<int32_t> computes;    // slot of each compute action
  std::vector<int32_t> compute_of;  // per slot: the number of the next compute at or after it
  std::vector<double> lead_before;  // per slot: compute time of the slots before it
};

Slots SlotsOf(const RankProgram& jit, const std::vector<int64_t>& live, const Model& model) {
  Slots s;
  s.lead_before.push_back(0);
  for (size_t i = 0; i < jit.size(); ++i) {
    const Action& a = jit[i];
    if (IsRecv(a.kind)) continue;
    const auto slot = static_cast<int32_t>(s.live.size());
    s.live.push_back(live[i]);
    s.compute_of.push_back(static_cast<int32_t>(s.computes.size()));
    if (IsCompute(a.kind)) s.computes.push_back(slot);
    s.lead_before.push_back(s.lead_before.back() + model.ComputeUs(a));
  }
  return s;
}

// Per receive of `early`'s rank, its slot there: the earliest it may go.
std::map<RecvKey, int32_t> EarliestSlots(const RankProgram& early) {
  std::map<RecvKey, int32_t> out;
  int32_t slot = 0;
  for (const Action& a : early) {
    if (IsRecv(a.kind)) {
      out[RecvKey::Of(a)] = slot;
    } else {
      ++slot;
    }
  }
  return out;
}

// Bytes the simulator moves for `recv` (rank_executable.cc: the SEND's
// stage's output bytes forward, input bytes backward).
double TransferBytes(const Action& recv, const Model& model) {
  return recv.kind == ActionKind::kRecvF
             ? static_cast<double>(model.ForStage(recv.stage - 1).output_bytes)
             : static_cast<double>(model.ForStage(recv.stage + 1).input_bytes);
}

// Chooses the offsets of one rank's receives (header: the loop over k).
// `added` holds, per slot, the bytes of receive buffers moved over it.
void ChooseRank(const RankProgram& jit, const RankBuffers& buffers, const RankProgram& early,
                const Model& model, int64_t cap, RecvOffsets& out) {
  const Slots s = SlotsOf(jit, LiveBytes(buffers), model);
  const std::map<RecvKey, int32_t> earliest = EarliestSlots(early);
  std::vector<int64_t> recv_bytes(jit.size(), 0);  // per program index: its received buffer
  for (const Buffer& b : buffers.buffers) {
    if (b.received && b.alloc_timing == AllocTiming::kBeforeAction) {
      recv_bytes[b.alloc_index] += b.bytes;
    }
  }
  std::vector<int64_t> added(s.live.size(), 0);
  auto fits = [&](int32_t from, int32_t to, int64_t bytes) {
    for (int32_t j = from; j < to; ++j) {
      if (s.live[j] + added[j] + bytes > cap) return false;
    }
    return true;
  };
  int32_t slot = 0;
  for (size_t i = 0; i < jit.size(); ++i) {
    const Action& a = jit[i];
    if (!IsRecv(a.kind)) {
      ++slot;
      continue;
    }
    // Just in time, the consumer is the next slot.
    const int32_t consumer = slot;
    const int32_t q = s.compute_of[consumer];
    const int32_t first = std::min(earliest.at(RecvKey::Of(a)), consumer);
    const double transfer = model.p2p.TransferUs(TransferBytes(a, model));
    const int64_t bytes = recv_bytes[i];
    int k = 0;
    int32_t at = consumer;
    while (s.lead_before[consumer] - s.lead_before[at] < transfer) {
      int32_t next = q - k - 1 >= 0 ? s.computes[q - k - 1] : 0;
      const bool clamped = next <= first;
      next = std::max(next, first);
      if (next >= at || !fits(next, at, bytes)) break;
      for (int32_t j = next; j < at; ++j) added[j] += bytes;
      at = next;
      k = clamped ? kRecvAheadAll : k + 1;
      if (clamped) break;
    }
    out.ahead[RecvKey::Of(a)] = k;
  }
}

}  // namespace

absl::StatusOr<RecvOffsets> ChooseRecvOffsets(const Schedule& early, const Model& model,
                                              const std::vector<int64_t>& caps) {
  if (!caps.empty() && caps.size() != static_cast<size_t>(early.pp)) {
    return absl::InvalidArgumentError(absl::StrCat("receive offsets: ", caps.size(),
                                                   " memory caps for ", early.pp, " ranks"));
  }
  for (size_t r = 0; r < caps.size(); ++r) {
    if (caps[r] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("receive offsets: rank ", r, "'s memory cap is negative (", caps[r], ")"));
    }
  }
  ASSIGN_OR_RETURN(const Schedule jit, PlaceRecvsJustInTime(early));
  RecvOffsets out;
  for (int r = 0; r < early.pp; ++r) {
    ASSIGN_OR_RETURN(const RankBuffers buffers,
                     ComputeBufferLifetimes(jit, model, r, {.policy = MemoryPolicy::kJit}));
    ChooseRank(jit.ranks[r], buffers, early.ranks[r], model,
               caps.empty() ? kNoRecvCap : caps[r], out);
  }
  return out;
}

std::vector<int64_t> PlannedBytesCaps(const Schedule& lowered, const Model& model,
                                      const TrainingMemory& training) {
  const MemoryReport resident = ResidentRankMemory(lowered, model, training);
  std::vector<int64_t> caps;
  caps.reserve(resident.ranks.size());
  for (const RankMemory& m : resident.ranks) {
    caps.push_back(m.has_limit() ? std::max<int64_t>(0, m.usable() - m.parameters - m.optimizer)
                                 : kNoRecvCap);
  }
  return caps;
}

RecvOffsetFunction RecvOffsetChooser(const Model& model, const TrainingMemory& training) {
  return [model, training](const Schedule& early) {
    return ChooseRecvOffsets(early, model, PlannedBytesCaps(early, model, training));
  };
}

}  // namespace jitpipe
