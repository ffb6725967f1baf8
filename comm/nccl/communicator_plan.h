// Which NCCL communicators a job needs, in which order they are connected,
// and which stream carries each point-to-point operation: the host-side
// logic of comm/nccl, as pure functions over the directed pairs of ranks that
// exchange data, tested on the CPU. No NCCL here.
//
// The two modes of PyTorch 2.15 (reference/pytorch_main_2026.md 1.12):
//
//   nccl (kEager)     one communicator over the whole job, created at once
//                     and bound to the rank's device; point-to-point on it,
//                     on one stream per rank: every transfer of a rank is in
//                     one FIFO. Before the first step the connections to the
//                     pipeline neighbours are warmed up (one tiny exchange per
//                     pair, in `rounds`), so that the first step does not pay
//                     for them.
//   nccl-lazy (kLazy) one 2-rank communicator per directed pair (src -> dst)
//                     that carries data, each with its own stream on both
//                     sides: a FIFO per directed edge. Created in `rounds` of
//                     disjoint pairs, in the same order on every rank
//                     (PyTorch's _directed_edge_split_rounds: interleaved
//                     1F1B at pp 4 needs 8 edges in 4 rounds): a rank takes
//                     part in at most one creation per round and every rank
//                     walks the rounds in order, so the first pending pair of
//                     the global order always has both ranks waiting for it
//                     and creation cannot deadlock (mg PR #5240 is the
//                     inconsistent order this rules out). Connected before
//                     the first step (the default: no creation inside a step
//                     or a CUDA-graph capture), or when the rank first posts a
//                     transfer -- then all of its edges at once, still in the
//                     global order.
//
// What each mode requires of a program (runtime/replay_plan.h,
// ProgramOrderFor): one FIFO per rank is the validator's strict semantics
// (`lower --recv jit-rendezvous`, `validate --strict`); a FIFO per directed
// edge needs the per-pair order only (relaxed semantics plus
// CheckPairOrder). NCCL matches transfers in order, never by tag.
#ifndef JITPIPE_COMM_NCCL_COMMUNICATOR_PLAN_H_
#define JITPIPE_COMM_NCCL_COMMUNICATOR_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jitpipe {

enum class NcclMode { kEager, kLazy };

// "nccl", "nccl-lazy": the names `replay --backend` takes.
absl::string_view NcclModeName(NcclMode mode);

// A directed pair of world ranks: src sends to dst.
struct Edge {
  int src = 0;
  int dst = 0;
  friend bool operator==(const Edge&, const Edge&) = default;
  friend auto operator<=>(const Edge&, const Edge&) = default;
  std::string ToString() const;  // "0->1"
};

struct CommunicatorPlan {
  NcclMode mode = NcclMode::kEager;
  int world_size = 0;
  // The directed pairs that exchange data, sorted and distinct.
  std::vector<Edge> edges;
  // kLazy: the edges, one communicator each, in creation rounds.
  // kEager: the unordered neighbour pairs (src < dst) to warm up, in rounds.
  // No rank appears twice in a round.
  std::vector<std::vector<Edge>> rounds;

  // What `rank` connects, in order: its pairs of `rounds`, round by round.
  std::vector<Edge> OrderOf(int rank) const;
  // The p2p stream slot of a transfer between `rank` and `peer`: 0 for
  // every transfer in kEager; in kLazy the position of its edge (rank ->
  // peer to send, peer -> rank to receive) among the rank's edges in
  // OrderOf(rank). -1 when the plan has no such edge.
  int StreamOf(int rank, int peer, bool send) const;
  // How many p2p streams `rank` has: 1 (kEager), its edges (kLazy).
  int NumStreams(int rank) const;
};

// Greedy rounds of pairs in which no rank appears twice: the pairs in the
// given order, each into the first round that holds neither of its ranks.
std::vector<std::vector<Edge>> DisjointRounds(absl::Span<const Edge> pairs);

// The plan for `edges` (any order, repeats allowed). An empty list means
// every directed pair of the world (a job that did not say which it uses).
// Errors: InvalidArgument for world_size < 1 or an edge outside the world
// or from a rank to itself, naming it.
absl::StatusOr<CommunicatorPlan> PlanCommunicators(NcclMode mode, int world_size,
                                                   absl::Span<const Edge> edges);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_NCCL_COMMUNICATOR_PLAN_H_
