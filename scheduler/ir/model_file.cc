#include "scheduler/ir/model_file.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe {

std::string ModelFingerprint(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return absl::StrCat("fnv1a64:", absl::Hex(hash, absl::kZeroPad16));
}

absl::StatusOr<ModelFile> ParseModelFileJson(absl::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text));
  RETURN_IF_ERROR(CheckFormatAndVersion(doc, kModelFormat, kLayeredModelVersion));
  ModelFile out;
  if (doc["version"] == kLayeredModelVersion) {
    out.version = kLayeredModelVersion;
    ASSIGN_OR_RETURN(out.layers, ParseLayeredModelJson(text));
  } else {
    ASSIGN_OR_RETURN(out.stages, ParseModelJson(text));
  }
  out.fingerprint = ModelFingerprint(text);
  return out;
}

absl::StatusOr<ModelFile> LoadModelFile(const std::string& path, std::uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, max_bytes));
  absl::StatusOr<ModelFile> model = ParseModelFileJson(text);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat(path, ": ", model.status().message()));
  }
  return model;
}

}  // namespace jitpipe
