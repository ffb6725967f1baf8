// What PyTorch main's deterministic receive-buffer pool (pt #196465,
// _RecvBufferPool) would hold for one rank's program, at three
// granularities, next to jitpipe's arena for the same receive buffers.
//
// PyTorch assigns every receive a slot of a pool from the schedule's
// lifetimes: a slot is taken when the receive is posted and given back only
// after the receive's last consumer has run (the forward and the backward
// phases that read a received activation, the backward phases that read a
// received gradient). These are exactly the received buffers' intervals of
// the jit plan (buffer_lifetimes.h: [RECV, last consumer]), so a pool of a
// group of receives needs as many slots as the most of them live at once
// (an interval graph is coloured by its largest clique), each slot as big
// as the group's largest buffer:
//
//   granularity          pools                               the reviewer's
//   (A) stage+direction  one per (stage, RECV_F / RECV_B)    "A"
//   (B) direction        one per direction, shared by stages "B"
//   (C) rank             one for every receive of the rank   "C"
//
// e.g. Interleaved1F1B pp 4, v 4 lowered as PyTorch lowers it (--recv early
// --fsdp --reduce-grad): A 22, 30, 28, 32 slots (sum 112), B 14, 20, 17, 18
// (69), C 14, 20, 17, 16 (67), for any number of microbatches: the
// review's table exactly.
//
// The receive arena places the same intervals at offsets (arena.h, byte
// exact: alignment 1, searched as the plan's arena is), each buffer as big
// as it is: fewer bytes than the best pool when sizes differ; with receives
// placed just in time (`lower --recv jit`) the intervals themselves are
// shorter.
//
// Pure; thread-compatible.
#ifndef JITPIPE_MEMORY_RECV_POOL_H_
#define JITPIPE_MEMORY_RECV_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "memory/buffer_lifetimes.h"

namespace jitpipe {

enum class RecvDirection : uint8_t { kForward, kBackward };  // RECV_F, RECV_B

// "forward", "backward".
const char* RecvDirectionName(RecvDirection direction);

struct PoolSize {
  int slots = 0;
  int64_t bytes = 0;  // slots x the largest buffer the pool serves
};

// One pool of granularity A.
struct StagePool {
  int32_t stage = 0;
  RecvDirection direction = RecvDirection::kForward;
  PoolSize size;
};

struct RecvPools {
  int rank = 0;
  std::vector<StagePool> per_stage;  // A's pools, by stage then direction
  PoolSize stage_direction;          // A: the sum of per_stage
  PoolSize forward, backward;        // B's two pools
  PoolSize direction;                // B: forward + backward
  PoolSize rank_pool;                // C
  int64_t arena_bytes = 0;           // the receive buffers in one arena
  int receives = 0;                  // received buffers on the rank

  // The smallest of A, B and C in bytes.
  int64_t best_pool_bytes() const;
  // "A 22 slots 88 MiB, B 14 ..., C 14 ...; arena ...": for logs and tests.
  std::string ToString() const;
};

// The pools of `buffers` (ComputeBufferLifetimes under MemoryPolicy::kJit
// without prefetch: receive buffers from their RECV to their last consumer;
// other policies give the intervals they give). Buffers handed over between
// stages of one rank are not received and not pooled. The arena's search
// stops at a layout within `arena_slack` of the receives' peak (0: one that
// reaches it, or the best of every ordering), as PlanOptions::arena_slack
// does for the plan's arena. REQUIRES: arena_slack >= 0.
RecvPools ComputeRecvPools(const RankBuffers& buffers, double arena_slack = 0);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_RECV_POOL_H_
