#include "stages/reference/mlp_gradients.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// One stage's gradients on the wire: stage, replica, element count, floats.
void AppendGradients(int stage, int replica, const std::vector<float>& grads, std::string& out) {
  const int32_t header[2] = {stage, replica};
  const int64_t count = static_cast<int64_t>(grads.size());
  out.append(reinterpret_cast<const char*>(header), sizeof(header));
  out.append(reinterpret_cast<const char*>(&count), sizeof(count));
  out.append(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float));
}

// Replays every record of `bytes` into the factory's stages' FinishStep.
absl::Status RecordGradients(absl::string_view bytes, MlpStageFactory& factory) {
  while (!bytes.empty()) {
    int32_t header[2];
    int64_t count = 0;
    if (bytes.size() < sizeof(header) + sizeof(count)) {
      return absl::InvalidArgumentError("truncated gradient record");
    }
    std::memcpy(header, bytes.data(), sizeof(header));
    std::memcpy(&count, bytes.data() + sizeof(header), sizeof(count));
    bytes.remove_prefix(sizeof(header) + sizeof(count));
    const size_t size = static_cast<size_t>(count) * sizeof(float);
    if (count < 0 || bytes.size() < size) {
      return absl::InvalidArgumentError("truncated gradient record");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory.Make(header[0], header[1]));
    RETURN_IF_ERROR(stage->FinishStep(
        ExecutionContext{}, ConstBytes(reinterpret_cast<const std::byte*>(bytes.data()), size)));
    bytes.remove_prefix(size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GatherMlpGradients(const Schedule& schedule, MlpStageFactory& factory, World& world,
                                absl::Duration timeout) {
  if (world.local_ranks().size() == static_cast<size_t>(world.size())) return absl::OkStatus();
  std::vector<std::string> mine;
  for (int w : world.local_ranks()) {
    const int rank = w % schedule.pp, replica = w / schedule.pp;
    std::string part;
    for (int s = 0; s < schedule.num_stages(); ++s) {
      if (schedule.RankOf(s) == rank) {
        AppendGradients(s, replica, factory.FinishedGrads(s, replica), part);
      }
    }
    mine.push_back(std::move(part));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, world.Gather(mine, timeout));
  for (size_t w = 0; w < parts.size(); ++w) {
    if (!world.is_local(static_cast<int>(w))) RETURN_IF_ERROR(RecordGradients(parts[w], factory));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
