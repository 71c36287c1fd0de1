#include "store/index/gc_plan.h"

#include <algorithm>

namespace cherenkov::store {

std::vector<GcItem> plan_gc(const Catalog& catalog, const LeaseProbe& lease_is_free) {
    const std::vector<std::string> referenced = catalog.referenced_artifacts();
    std::vector<GcItem> plan;
    for (const Artifact& artifact : catalog.artifacts) {
        const bool is_referenced =
            std::find(referenced.begin(), referenced.end(), artifact.id) != referenced.end();
        if (is_referenced) continue;  // only Ready artifacts are referenced (parse checks it)
        GcItem item{artifact.id, artifact.kind, artifact.owner, GcAction::Skip, ""};
        const bool free = lease_is_free(artifact.id);
        switch (artifact.state) {
            case ArtifactState::Importing:
                item.reason = free ? "abandoned import" : "import in progress";
                break;
            case ArtifactState::Deleting:
                item.reason = free ? "interrupted collection" : "in use";
                break;
            case ArtifactState::Ready: item.reason = free ? "unreferenced" : "in use"; break;
        }
        if (free) {
            item.action =
                artifact.owner == Ownership::Managed ? GcAction::Delete : GcAction::Forget;
        }
        plan.push_back(std::move(item));
    }
    return plan;
}

}  // namespace cherenkov::store
