// A lowered program's memory under PyTorch main's runtime, beside jitpipe's
// plan: what `jitpipe plan` prints under "PyTorch's runtime".
//
//   receive pools   the deterministic pool at three granularities
//                   (memory/recv_pool.h), and the receive buffers in an arena
//   send release    the jit peak (receive buffers at their RECV) when sent
//                   buffers are released
//                     drain      at the step's end (PyTorch before main)
//                     poll       once the transfer completed (PyTorch main's
//                                polling; jitpipe's jit plan)
//                     wait-send  at the WAIT_SEND_F _add_wait_send places
//                                (activations; gradients are drained)
//                     budget K   at the WAIT_SENDs _add_wait_send_budget(K)
//                                places (the rest drained)
//
// Every policy starts from the program as given with its WAIT_SENDs taken
// out, so that they differ only in where sent buffers go. The budget is the
// smallest >= the one asked for that the program's receive placement lets
// the budget walk keep (add_wait_send_budget.h). A policy whose pass refuses
// the program (e.g. one that does not validate) has no peak; the reason is
// kept.
//
// Pure; thread-compatible. Cost: two passes over the program (side by
// side) and, per rank (ranks side by side), four lifetime computations and
// the pools.
#ifndef JITPIPE_PLANNING_PYTORCH_MEMORY_H_
#define JITPIPE_PLANNING_PYTORCH_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/arena.h"
#include "memory/recv_pool.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct PyTorchMemoryOptions {
  int send_budget = 1;  // K asked for, >= 1
  // Ranks (and the two WAIT_SEND placements) computed side by side on up to
  // this many threads; <= 0: one per hardware thread. The result does not
  // depend on it.
  int threads = 0;
  // The receive arena's search stops within this fraction of the receives'
  // peak (ComputeRecvPools); `plan` passes its --arena-slack.
  double arena_slack = kDefaultArenaSlack;
};

struct SendReleasePeaks {
  int64_t drain = 0;
  int64_t poll = 0;
  std::optional<int64_t> wait_send;
  std::optional<int64_t> budget;
};

struct PyTorchMemoryRank {
  int rank = 0;
  RecvPools pools;
  SendReleasePeaks peaks;
};

struct PyTorchMemory {
  std::vector<PyTorchMemoryRank> ranks;
  int send_budget = 0;           // the budget used (>= the one asked for)
  std::string wait_send_error;   // why wait-send has no peaks ("" when it has)
  std::string budget_error;      // why the budget has no peaks ("" when it has)
};

// Errors: FailedPrecondition for a compute-only schedule; InvalidArgument
// for a budget below 1 and from ComputeBufferLifetimes (naming rank, index
// and action) and CheckModelFits.
absl::StatusOr<PyTorchMemory> PlanPyTorchMemory(const Schedule& lowered, const Model& model,
                                                const PyTorchMemoryOptions& options = {});

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_PYTORCH_MEMORY_H_
