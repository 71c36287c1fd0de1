// Which indexed models a selector names, from the catalog alone: no network and no change to
// any file (paths are only canonicalized). Commands decide what to do with zero matches
// (register, fall back to a path, or fail); more than one is always an error.
#pragma once

#include <string>
#include <vector>

#include "store/index/catalog.h"
#include "store/index/selector.h"
#include "store/index/storage_paths.h"

namespace cherenkov::store {

// Throws NotFound for a disk:// store that is not registered, InvalidInput for a disabled one.
std::vector<const ModelEntry*> match_models(const Catalog& catalog, const Selector& selector,
                                            const StoragePaths& paths);

// The single match, or nullptr for none; throws InvalidInput listing the candidates for several.
const ModelEntry* match_one(const Catalog& catalog, const Selector& selector,
                            const StoragePaths& paths);

// The absolute, symlink-resolved form of a path selector (the path need not exist).
std::string canonical_path(const std::string& path);

// Where an artifact's files are: artifacts/<id> for managed ones, the recorded path otherwise.
std::string artifact_location(const Artifact& artifact, const StoragePaths& paths);

// "alias" when set, else the model ID: what to type to select the model again.
std::string model_reference(const ModelEntry& model);

}  // namespace cherenkov::store
