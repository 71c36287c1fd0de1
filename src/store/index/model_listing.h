// `model list --json` and the index side of `inspect`: what the catalog records, with sizes
// and expert variants read from the artifact directories. Works offline.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model_data/inspect/inspect_target.h"
#include "store/index/index_options.h"

namespace cherenkov::store {

// {"models": [{id, alias, reference, source{...}, prepared, store{...}|null,
//   retained_source{...}|null, registered}], "totals": {"owned_bytes", "external_bytes"}}
nlohmann::json list_models(const IndexOptions& options);

// `store list --json`: {"stores": [{id, name, root, layout, enabled}]}.
nlohmann::json list_stores(const IndexOptions& options);

// `inspect REF`: for an indexed model, its prepared store when recorded, else the description
// saved at registration. Unindexed paths and http(s) URLs are inspected directly; an unindexed
// hf:// URI is resolved on the Hub and inspected with range reads (nothing is registered).
model_data::inspect::InspectOutput inspect_model(const std::string& selector,
                                                 const IndexOptions& options);

}  // namespace cherenkov::store
