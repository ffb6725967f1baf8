// The stage executor's side of jitpipe: what a pipeline stage must provide
// so that the runtime can drive it through any schedule.
//
// One Stage object is one model stage on one data-parallel replica. The
// runtime calls it from a single thread (the rank's compute thread), in the
// order the schedule dictates, and hands it every buffer: the Stage never
// allocates per-microbatch memory itself. Buffers come from the memory plan
// (arena offsets or a tracked allocator) and have exactly the sizes Sizes()
// reports; a span is empty where the role does not exist (the chain's first
// stage produces no input gradient; its last stage receives no output
// gradient: it derives one from its own loss).
//
// Per microbatch m the runtime calls, in this order:
//   LoadInput(ctx, m, input)                      chain's first stage only
//   Forward(ctx, m, input, output, stash)
//   BackwardInput(ctx, m, output_grad, stash, input_grad)       (I) | or Backward
//   BackwardWeight(ctx, m, input, output_grad, stash, param_grad) (W) | (B) once
// `ctx` (execution_context.h) says where the buffers live and what the call
// runs on: on the host, synchronously, unless the rank runs on a device, in
// which case the call enqueues its work on ctx.stream. A Stage that cannot
// run in the context it is handed fails with FailedPrecondition saying so.
// param_grad is zeroed by the runtime before the stage's first W or B of a
// step and accumulates over microbatches; after the step's reduction it holds
// the data-parallel sum. BackwardInput may write into the stash (e.g. the
// per-layer gradients its W will need); BackwardWeight only reads it.
//
// The stash may come in segments: a stage whose stash is several tensors
// (a transformer stage: one per layer and one for the loss head) declares
// their sizes in StageSizes::stash_segments, and the runtime then hands it
// one buffer per segment, each placed by the memory plan on its own. A
// static arena packs such pieces far tighter than one block of their sum
// (docs/memory-and-time.md, "A stash in segments").
//
// Errors: any non-OK status aborts the step on every rank, naming the rank,
// index and action.
#ifndef JITPIPE_STAGES_EXEC_STAGE_H_
#define JITPIPE_STAGES_EXEC_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "stages/exec/execution_context.h"

namespace jitpipe {

using ConstBytes = absl::Span<const std::byte>;
using MutableBytes = absl::Span<std::byte>;

// Bytes per microbatch of each buffer role, and of the parameter gradients.
struct StageSizes {
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;
  int64_t stash_bytes = 0;
  int64_t param_grad_bytes = 0;
  // Empty: the stash is one buffer; else its segments, summing to
  // stash_bytes, in the order the stage wants them.
  std::vector<int64_t> stash_segments = {};

  // The stash's buffers: stash_segments, or {stash_bytes} without them.
  std::vector<int64_t> StashAllocations() const {
    return stash_segments.empty() ? std::vector<int64_t>{stash_bytes} : stash_segments;
  }
};

// One microbatch's stash as a Stage call receives it: its segments (each a
// buffer of its own), or one span holding the whole stash. A view of spans
// the caller keeps alive for the call.
class StashView {
 public:
  // No stash at all (zero segments).
  StashView() = default;
  // The whole stash in one span (implicit: a caller with one buffer passes
  // it as it is).
  StashView(MutableBytes whole) : whole_(whole), whole_given_(true) {}  // NOLINT
  // The segments, in the stage's order.
  explicit StashView(absl::Span<const MutableBytes> segments) : segments_(segments) {}

  size_t count() const { return whole_given_ ? 1 : segments_.size(); }
  MutableBytes segment(size_t i) const { return whole_given_ ? whole_ : segments_[i]; }
  int64_t bytes() const;
  // The span of a stash of one segment (a stage that declares none); an
  // empty span for any other count, which that stage's size check rejects.
  MutableBytes Single() const { return count() == 1 ? segment(0) : MutableBytes(); }

 private:
  MutableBytes whole_;
  absl::Span<const MutableBytes> segments_;
  bool whole_given_ = false;
};

using StashSegments = absl::InlinedVector<MutableBytes, 8>;

// The stash as the segments a stage declared (`expected`: bytes per segment,
// at least one): the view's own when it has as many, each of its size, or
// the consecutive slices of a view of one span of their sum (a caller that
// holds the stash in one buffer). Errors: InvalidArgument naming `who` and
// both layouts, e.g. "transformer stage 3: the stash has 2 segments
// (100, 200 bytes); expected 3 (100, 100, 100 bytes) or one of 300".
absl::StatusOr<StashSegments> SplitStash(StashView stash, absl::Span<const int64_t> expected,
                                         absl::string_view who);

class Stage {
 public:
  virtual ~Stage() = default;

  virtual StageSizes Sizes() const = 0;

  // Fills the microbatch's input data. Called on a chain's first stage only.
  virtual absl::Status LoadInput(const ExecutionContext& ctx, int microbatch,
                                 MutableBytes input) = 0;

  virtual absl::Status Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                               MutableBytes output, StashView stash) = 0;

  virtual absl::Status BackwardInput(const ExecutionContext& ctx, int microbatch,
                                     ConstBytes output_grad, StashView stash,
                                     MutableBytes input_grad) = 0;

  virtual absl::Status BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                                      ConstBytes output_grad, StashView stash,
                                      MutableBytes param_grad) = 0;

  // A full backward; by default BackwardInput then BackwardWeight.
  virtual absl::Status Backward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                                ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                                MutableBytes param_grad);

  // The microbatch's loss, on a chain's last stage after its Forward; 0 on
  // other stages. The runtime reports the sum over a step's microbatches
  // and replicas, so a stage that wants the mean returns its share (the
  // reference mlp divides by microbatches x replicas).
  virtual double Loss(int /*microbatch*/) const { return 0; }

  // Called once per step after the stage's gradient reduction has ended and
  // before the gradients are released: where an optimizer would update the
  // parameters. `param_grad` holds the data-parallel sum (all-reduce) or,
  // under reduce-scatter, this replica's shard of it at its place.
  virtual absl::Status FinishStep(const ExecutionContext& /*ctx*/, ConstBytes /*param_grad*/) {
    return absl::OkStatus();
  }
};

// Makes the Stage for `stage` on data-parallel replica `replica`. Called once
// per (stage, replica) before a run, from the thread that will use it.
class StageFactory {
 public:
  virtual ~StageFactory() = default;
  virtual absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) = 0;
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_STAGE_H_
