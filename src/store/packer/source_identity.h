// What a store records of the checkpoint it was packed from (manifest "source"), and the test
// `prepare` applies before reusing a store: the same kind and the same content hashes of
// config.json, the shard index and every safetensors header. Path and mtimes may differ (a
// moved or copied checkpoint is the same source).
#pragma once

#include <optional>
#include <string>

#include "store/manifest/store_manifest.h"

namespace cherenkov::store {

// Files, sizes, mtimes and hashes of the checkpoint in `directory`: config.json and
// model.safetensors.index.json (sha256 of the content) and every *.safetensors file (sha256 of
// its 8-byte header length and JSON header, not of the tensor data). `kind` and
// `norm_convention` are recorded as given.
SourceIdentity read_source_identity(const std::string& directory, const std::string& kind,
                                    const std::string& norm_convention);

// Empty when `current` is the source `recorded` describes; otherwise what differs, for example
// "different config.json" or "different kind: hf-bf16, the store's is mlx-affine". Without
// recorded hashes (stores packed before they existed) names and sizes are compared instead.
std::optional<std::string> source_difference(const SourceIdentity& recorded,
                                             const SourceIdentity& current);

}  // namespace cherenkov::store
