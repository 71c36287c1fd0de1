#include "store/index/model_lookup.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::store {
namespace {

const std::string kCommitA = "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506";
const std::string kCommitB = "6cc9bbc0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

ModelEntry hf_model(const std::string& id, const std::string& repo, const std::string& commit,
                    const std::string& revision = "") {
    ModelEntry model;
    model.id = id;
    model.source.kind = SourceKind::Hf;
    model.source.endpoint = "https://huggingface.co";
    model.source.repo = repo;
    model.source.commit = commit;
    model.source.revision = revision;
    return model;
}

class ModelLookup : public ::testing::Test {
protected:
    ModelLookup() {
        paths_.data = "/data";
        ModelEntry a = hf_model("aaaaaaaaaaaa", "owner/repo", kCommitA, "main");
        a.alias = "small";
        catalog_.models.push_back(a);
        catalog_.models.push_back(hf_model("bbbbbbbbbbbb", "owner/repo", kCommitB));
        catalog_.models.push_back(
            hf_model("cccccccccccc", "owner/other", kCommitB.substr(0, 39) + "f"));
        ModelEntry local;
        local.id = "dddddddddddd";
        local.source.kind = SourceKind::Local;
        local.source.path = "/srv/checkpoints/x";
        local.store_artifact = "1111111111111111";
        catalog_.models.push_back(local);
        catalog_.artifacts.push_back({"1111111111111111", ArtifactKind::Store, Ownership::Managed,
                                      ArtifactState::Ready, "", "dddddddddddd"});
        catalog_.stores.push_back({"0123456789ab", "off", "/srv", StoreLayout::Default, false});
    }

    std::vector<std::string> ids(const std::string& text) {
        std::vector<std::string> out;
        for (const ModelEntry* model : match_models(catalog_, parse_selector(text), paths_)) {
            out.push_back(model->id);
        }
        return out;
    }

    Catalog catalog_;
    StoragePaths paths_;
};

using Ids = std::vector<std::string>;

TEST_F(ModelLookup, AliasesAndIds) {
    EXPECT_EQ(ids("small"), Ids{"aaaaaaaaaaaa"});
    EXPECT_EQ(ids("model:small"), Ids{"aaaaaaaaaaaa"});
    EXPECT_EQ(ids("bbbbbbbbbbbb"), Ids{"bbbbbbbbbbbb"});
    EXPECT_TRUE(ids("unknown").empty());
}

TEST_F(ModelLookup, UnqualifiedHfUriMatchesEveryIndexedCommit) {
    EXPECT_EQ(ids("hf://owner/repo"), (Ids{"aaaaaaaaaaaa", "bbbbbbbbbbbb"}));
    EXPECT_EQ(ids("hf://owner/other"), Ids{"cccccccccccc"});
    EXPECT_TRUE(ids("hf://owner/none").empty());
    try {
        match_one(catalog_, parse_selector("hf://owner/repo"), paths_);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("specify @commit, an alias or an ID"),
                  std::string::npos);
    }
}

TEST_F(ModelLookup, RevisionsCommitsAndPrefixes) {
    EXPECT_EQ(ids("hf://owner/repo@" + kCommitA), Ids{"aaaaaaaaaaaa"});
    EXPECT_EQ(ids("hf://owner/repo@6CC9BBC0FAE9"), Ids{"aaaaaaaaaaaa"});
    EXPECT_EQ(ids("hf://owner/repo@main"), Ids{"aaaaaaaaaaaa"});  // recorded at registration
    EXPECT_TRUE(ids("hf://owner/repo@dev").empty());
    EXPECT_EQ(ids("6cc9bbc0fae9"), Ids{"aaaaaaaaaaaa"});
    EXPECT_EQ(ids("6cc9bbc0").size(), 3u);  // ambiguous: all three commits start so
    EXPECT_TRUE(ids("6cc9bbc").empty());    // seven digits are a name, not a prefix
    EXPECT_EQ(ids("6cc9bbc0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), Ids{"bbbbbbbbbbbb"});
}

TEST_F(ModelLookup, PathsMatchSourcesAndStores) {
    EXPECT_EQ(ids("/srv/checkpoints/x"), Ids{"dddddddddddd"});
    EXPECT_EQ(ids("/srv/checkpoints/x/"), Ids{"dddddddddddd"});
    EXPECT_EQ(ids("/data/artifacts/1111111111111111"), Ids{"dddddddddddd"});
    EXPECT_TRUE(ids("/srv/checkpoints/y").empty());
}

TEST_F(ModelLookup, DiskSelectorsNeedAnEnabledStore) {
    EXPECT_THROW(ids("disk://missing/o/r"), Error);
    try {
        ids("disk://off/o/r");
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("disabled"), std::string::npos);
    }
}

}  // namespace
}  // namespace cherenkov::store
