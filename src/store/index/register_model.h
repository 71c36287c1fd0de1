// Registration (`model add`, and the first step of `prepare`): finds the model a selector names
// in the index or records it, with the source description saved at registration. HF sources are
// pinned to a full commit and described from config, shard index and safetensors headers read
// with range requests (up to 8 at once); nothing else of the weights is fetched.
#pragma once

#include <string>

#include "model_data/inspect/inspect_target.h"
#include "store/index/index_options.h"
#include "store/index/model_index.h"
#include "store/index/selector.h"

namespace cherenkov::store {

struct RegisteredModel {
    std::string model_id;
    bool created = false;  // false: an existing entry matched (its alias may have been set)
};

// Bare names only look up aliases and IDs (or an existing local path) and never download.
// An unqualified hf:// URI reuses its indexed commit without contacting the Hub; a branch or tag
// is resolved on the Hub. `alias`, when not empty, is set on the entry.
RegisteredModel register_model(const ModelIndex& index, const Selector& selector,
                               const std::string& alias, const IndexOptions& options);

// The description saved at registration: artifacts/<id>/description.json.
void write_description(const std::string& directory,
                       const model_data::inspect::InspectOutput& description);
model_data::inspect::InspectOutput read_description(const std::string& directory);

// Sets (or moves) an alias inside a transaction; throws InvalidInput when another model has it.
void assign_alias(Catalog& catalog, const std::string& model_id, const std::string& alias);

}  // namespace cherenkov::store
