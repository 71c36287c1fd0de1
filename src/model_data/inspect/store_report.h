// `cherenkov inspect STORE_DIR` on a packed Cherenkov store (docs/store-format.md): the manifest's
// source, files (sizes on disk against the manifest), expert record layout, low-bit variants and
// every dense tensor's encoding and byte range. This layer sits below the store layer, so the
// manifest is read as JSON here; `prepare` does the full validation.
#pragma once

#include <string>

#include "model_data/inspect/inspect_target.h"

namespace cherenkov::model_data::inspect {

// A directory whose manifest.json carries the store format marker.
bool is_store_directory(const std::string& directory);

InspectOutput inspect_store(const std::string& directory);

}  // namespace cherenkov::model_data::inspect
