#include "store/index/gc_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace cherenkov::store {
namespace {

Artifact artifact(const std::string& id, ArtifactKind kind, Ownership owner, ArtifactState state) {
    return Artifact{id,
                    kind,
                    owner,
                    state,
                    owner == Ownership::External ? "/exports/" + id : "",
                    "aaaaaaaaaaaa"};
}

TEST(GcPlan, CollectsOnlyWhatTheCatalogOwnsAndNobodyUses) {
    Catalog catalog;
    ModelEntry model;
    model.id = "aaaaaaaaaaaa";
    model.store_artifact = "0000000000000001";
    model.description_artifact = "0000000000000002";
    catalog.models.push_back(model);
    using K = ArtifactKind;
    using O = Ownership;
    using S = ArtifactState;
    catalog.artifacts = {
        artifact("0000000000000001", K::Store, O::Managed, S::Ready),        // referenced
        artifact("0000000000000002", K::Description, O::Managed, S::Ready),  // referenced
        artifact("0000000000000003", K::Store, O::Managed, S::Ready),        // unreferenced
        artifact("0000000000000004", K::Store, O::External, S::Ready),       // external
        artifact("0000000000000005", K::Source, O::Managed, S::Importing),   // abandoned
        artifact("0000000000000006", K::Source, O::Managed, S::Importing),   // live import
        artifact("0000000000000007", K::Store, O::Managed, S::Ready),        // leased reader
        artifact("0000000000000008", K::Store, O::Managed, S::Deleting),     // interrupted gc
    };
    const std::set<std::string> held = {"0000000000000006", "0000000000000007"};
    std::set<std::string> probed;
    const std::vector<GcItem> plan = plan_gc(catalog, [&](const std::string& id) {
        probed.insert(id);
        return held.count(id) == 0;
    });
    EXPECT_EQ(probed.count("0000000000000001"), 0u) << "referenced artifacts are not even probed";
    ASSERT_EQ(plan.size(), 6u);
    auto find = [&](const std::string& id) {
        for (const GcItem& item : plan) {
            if (item.artifact_id == id) return item;
        }
        ADD_FAILURE() << id << " missing from the plan";
        return GcItem{};
    };
    EXPECT_EQ(find("0000000000000003").action, GcAction::Delete);
    EXPECT_EQ(find("0000000000000003").reason, "unreferenced");
    EXPECT_EQ(find("0000000000000004").action, GcAction::Forget);
    EXPECT_EQ(find("0000000000000005").action, GcAction::Delete);
    EXPECT_EQ(find("0000000000000005").reason, "abandoned import");
    EXPECT_EQ(find("0000000000000006").action, GcAction::Skip);
    EXPECT_EQ(find("0000000000000006").reason, "import in progress");
    EXPECT_EQ(find("0000000000000007").action, GcAction::Skip);
    EXPECT_EQ(find("0000000000000007").reason, "in use");
    EXPECT_EQ(find("0000000000000008").action, GcAction::Delete);
    EXPECT_EQ(find("0000000000000008").reason, "interrupted collection");
}

TEST(GcPlan, EmptyCatalogPlansNothing) {
    EXPECT_TRUE(plan_gc(Catalog{}, [](const std::string&) { return true; }).empty());
}

}  // namespace
}  // namespace cherenkov::store
