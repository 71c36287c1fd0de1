// resolve_model: the one call every command that runs a model makes (generation, logits,
// perplexity, bench, serve). It accepts every selector (docs/model-index.md):
//
//   alias | model ID | hf://owner/repo[@rev] | disk://STORE/owner/repo[@rev] | commit prefix (>= 8
//   hex) | path to a registered source or store | path to an unregistered packed store
//
// and returns the packed store directory to load, holding a shared lease on it so `model gc`
// cannot collect it while the returned object lives. It never contacts the Hub and never
// writes the catalog:
//   - not registered / unknown name  -> NotFound ("... run cherenkov prepare ...")
//   - registered but not prepared    -> NotFound ("... is registered but not prepared; run
//                                       `cherenkov prepare <selector>`")
// Every command a message suggests works when pasted (prepare_command.h).
//   - several matches                -> InvalidInput listing them
//   - store being collected          -> Busy
//
// Usage:
//   store::IndexOptions options = store::index_options_from_environment(root, "");
//   store::ResolvedModel model = store::resolve_model("small-moe", options);
//   load(model.store_dir);  // keep `model` alive while the store's files are in use
#pragma once

#include <string>

#include "base/file_lock.h"
#include "store/index/index_options.h"

namespace cherenkov::store {

struct ResolvedModel {
    std::string store_dir;  // absolute path of the packed store (manifest.json, dense.bin, ...)
    std::string model_id;   // empty for an unregistered packed directory given by path
    std::string alias;
    std::string reference;  // what to type to select it again: alias, ID or the path
    std::string selector;   // as the caller gave it ("" : the default checkpoint), for messages
    std::string source;     // the source URI or path, for messages
    FileLock lease;         // shared lease on the store artifact (not held when unregistered)
};

// An empty selector selects the default checkpoint (default_model_reference()).
ResolvedModel resolve_model(const std::string& selector, const IndexOptions& options);

}  // namespace cherenkov::store
