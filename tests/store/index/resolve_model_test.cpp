#include "store/index/resolve_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "store/index/model_index.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

const std::string kCommit = "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506";

void write_store(const fs::path& directory) {
    fs::create_directories(directory);
    std::ofstream(directory / "manifest.json") << R"({"format": "cherenkov-store"})";
}

class ResolveModel : public ::testing::Test {
protected:
    ResolveModel() {
        root_ = fs::temp_directory_path() /
                ("cherenkov_resolve_test_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        options_.paths.data = (root_ / "data").string();
        options_.hub.endpoint = "http://127.0.0.1:9";  // never contacted
        const ModelIndex index(options_.paths);
        ModelIndex::Transaction transaction = index.begin();
        Catalog& catalog = transaction.catalog();
        ModelEntry prepared;
        prepared.id = "aaaaaaaaaaaa";
        prepared.alias = "small";
        prepared.source.kind = SourceKind::Hf;
        prepared.source.endpoint = "https://huggingface.co";
        prepared.source.repo = "owner/repo";
        prepared.source.commit = kCommit;
        prepared.store_artifact = "1111111111111111";
        catalog.models.push_back(prepared);
        catalog.artifacts.push_back({"1111111111111111", ArtifactKind::Store, Ownership::Managed,
                                     ArtifactState::Ready, "", prepared.id});
        write_store(options_.paths.artifact_dir("1111111111111111"));
        ModelEntry registered;
        registered.id = "bbbbbbbbbbbb";
        registered.alias = "later";
        registered.source.kind = SourceKind::Local;
        registered.source.path = (root_ / "checkpoint").string();
        catalog.models.push_back(registered);
        transaction.commit();
        write_store(root_ / "loose-store");
    }
    ~ResolveModel() override { fs::remove_all(root_); }

    ErrorKind failure(const std::string& selector, const std::string& fragment) {
        try {
            resolve_model(selector, options_);
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
            return error.kind();
        }
        ADD_FAILURE() << selector << " resolved";
        return ErrorKind::Internal;
    }

    fs::path root_;
    IndexOptions options_;
};

TEST_F(ResolveModel, EverySelectorFormReachesTheStore) {
    const std::string store = options_.paths.artifact_dir("1111111111111111");
    for (const std::string& selector : std::vector<std::string>{
             "small", "aaaaaaaaaaaa", "model:small", "hf://owner/repo",
             "hf://owner/repo@" + kCommit, "hf://owner/repo@6cc9bbc0", "6cc9bbc0fae9", store}) {
        const ResolvedModel model = resolve_model(selector, options_);
        EXPECT_EQ(model.store_dir, store) << selector;
        EXPECT_EQ(model.reference, "small");
        EXPECT_EQ(model.source, "hf://owner/repo@" + kCommit);
        EXPECT_TRUE(model.lease.held());
    }
}

TEST_F(ResolveModel, TheLeaseKeepsCollectionAway) {
    const ModelIndex index(options_.paths);
    {
        const ResolvedModel model = resolve_model("small", options_);
        EXPECT_FALSE(index.try_lease("1111111111111111", LockMode::Exclusive).has_value());
    }
    EXPECT_TRUE(index.try_lease("1111111111111111", LockMode::Exclusive).has_value());
    std::optional<FileLock> collector = index.try_lease("1111111111111111", LockMode::Exclusive);
    EXPECT_EQ(failure("small", "being collected"), ErrorKind::Busy);
}

TEST_F(ResolveModel, UnpreparedUnknownAndAmbiguousSelectorsFailClearly) {
    EXPECT_EQ(failure("later", "registered but not prepared; run `cherenkov prepare later`"),
              ErrorKind::NotFound);
    EXPECT_EQ(failure("nothing", "no indexed model"), ErrorKind::NotFound);
    EXPECT_EQ(failure("hf://owner/other", "cherenkov prepare hf://owner/other"),
              ErrorKind::NotFound);
    EXPECT_EQ(failure((root_ / "missing").string(), "no such file"), ErrorKind::NotFound);
    EXPECT_EQ(failure("hf://owner/repo@main", "not in the model index"), ErrorKind::NotFound);
}

TEST_F(ResolveModel, UnregisteredPackedDirectoriesRunWithoutALease) {
    const ResolvedModel model = resolve_model((root_ / "loose-store").string(), options_);
    EXPECT_EQ(model.store_dir, (root_ / "loose-store").string());
    EXPECT_TRUE(model.model_id.empty());
    EXPECT_FALSE(model.lease.held());
}

TEST_F(ResolveModel, AMissingStoreIsReported) {
    fs::remove_all(options_.paths.artifact_dir("1111111111111111"));
    EXPECT_EQ(failure("small", "missing"), ErrorKind::Corrupt);
}

}  // namespace
}  // namespace cherenkov::store
