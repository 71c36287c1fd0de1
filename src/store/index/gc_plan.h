// What `model gc` may collect, decided from the catalog and the leases alone (docs/model-index.md):
// managed artifacts no model refers to, abandoned imports (importing, lease free) and interrupted
// collections (deleting, lease free) are removed; unreferenced external artifacts lose only their
// record; anything whose lease is held is left alone. Files the catalog does not record as
// managed are never candidates.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "store/index/catalog.h"

namespace cherenkov::store {

enum class GcAction {
    Delete,  // managed: delete the directory, then the record
    Forget,  // external: drop the record, leave the files
    Skip,    // leased by a reader or a running import
};

struct GcItem {
    std::string artifact_id;
    ArtifactKind kind = ArtifactKind::Store;
    Ownership owner = Ownership::Managed;
    GcAction action = GcAction::Skip;
    std::string reason;  // "unreferenced", "abandoned import", "interrupted collection",
                         // "in use" (leased), "import in progress"
};

// Called for each candidate; returns true when the artifact's lease could be taken exclusively
// (so nobody reads or imports it). The caller keeps what it took until the plan is carried out.
using LeaseProbe = std::function<bool(const std::string& artifact_id)>;

std::vector<GcItem> plan_gc(const Catalog& catalog, const LeaseProbe& lease_is_free);

}  // namespace cherenkov::store
