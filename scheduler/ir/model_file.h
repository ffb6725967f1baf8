// A model file of either version: version 1 gives per-stage costs (model.h),
// version 2 layers and heads (layered_model.h). Commands that take --model
// read it with LoadModelFile; a version 2 model becomes per-stage costs for a
// schedule through a partition (planning/partition.h).
#ifndef JITPIPE_SCHEDULER_IR_MODEL_FILE_H_
#define JITPIPE_SCHEDULER_IR_MODEL_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/atomic_file.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/model.h"

namespace jitpipe {

struct ModelFile {
  int version = kModelVersion;
  Model stages = {};    // version 1
  LayeredModel layers = {};  // version 2
  // Identifies the document this was read from: "fnv1a64:" and 16 hex
  // digits of the FNV-1a hash of its bytes (an identity, not a signature;
  // any edit, whitespace too, changes it). Schedules a planner made for
  // this model record it (schedule.h).
  std::string fingerprint = {};

  bool layered() const { return version == kLayeredModelVersion; }
};

// ModelFile::fingerprint of a document's text.
std::string ModelFingerprint(absl::string_view text);

// Parses a model document of either version and validates it. Errors:
// InvalidArgument naming the field; a newer version is refused as written by
// a newer jitpipe.
absl::StatusOr<ModelFile> ParseModelFileJson(absl::string_view text);

// Reads and parses a model file; every error message starts with the path.
// Errors: NotFound / Unavailable for I/O, InvalidArgument for content,
// ResourceExhausted for a file longer than `max_bytes`.
absl::StatusOr<ModelFile> LoadModelFile(const std::string& path,
                                        std::uint64_t max_bytes = kDefaultMaxInputBytes);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_MODEL_FILE_H_
