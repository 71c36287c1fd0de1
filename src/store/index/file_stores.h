// Filesystem stores (seed "Filesystem stores"): named roots that disk://NAME/owner/repo selects
// from. The default layout is ROOT/owner/repo; the hf-cache layout reads a Hugging Face cache
// (ROOT/models--owner--repo/snapshots/<commit>, refs/<revision>) without downloading. Registering
// records the root without crawling it; files under a store are always externally owned.
#pragma once

#include <string>

#include "store/index/catalog.h"
#include "store/index/model_index.h"
#include "store/index/selector.h"

namespace cherenkov::store {

struct DiskLocation {
    std::string path;      // absolute directory of the checkpoint (or packed store)
    std::string commit;    // hf-cache: the snapshot's commit; default layout: empty
    std::string revision;  // the ref that was followed ("main"), if any
};

// Finds the repository inside the store. Throws NotFound naming what is missing, InvalidInput for
// a revision in the default layout, and for a commit prefix that matches several snapshots.
DiskLocation locate_in_store(const FsStore& store, const DiskUri& uri);

// `store add`: the root must be an existing directory; the name must be new.
FsStore add_store(const ModelIndex& index, const std::string& name, const std::string& root,
                  StoreLayout layout);
// `store enable|disable NAME`.
void set_store_enabled(const ModelIndex& index, const std::string& name, bool enabled);
// `store remove NAME`: deletes only the registration; models keep their recorded paths.
void remove_store(const ModelIndex& index, const std::string& name);

}  // namespace cherenkov::store
