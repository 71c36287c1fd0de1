#include "store/index/model_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

class ModelIndexTest : public ::testing::Test {
protected:
    ModelIndexTest() {
        root_ = fs::temp_directory_path() /
                ("cherenkov_index_test_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(root_);
        paths_.data = (root_ / "data").string();
    }
    ~ModelIndexTest() override { fs::remove_all(root_); }

    fs::path root_;
    StoragePaths paths_;
};

TEST_F(ModelIndexTest, AbsentIndexReadsEmptyAndCreatesNothing) {
    const ModelIndex index(paths_);
    EXPECT_TRUE(index.load().models.empty());
    EXPECT_FALSE(fs::exists(paths_.data));
}

TEST_F(ModelIndexTest, TransactionsPublishAtomically) {
    const ModelIndex index(paths_);
    {
        ModelIndex::Transaction transaction = index.begin();
        ModelEntry model;
        model.id = transaction.new_model_id();
        model.source.kind = SourceKind::Local;
        model.source.path = "/x";
        transaction.catalog().models.push_back(model);
        transaction.commit();
    }
    {
        ModelIndex::Transaction transaction = index.begin();
        transaction.catalog().models.clear();  // not committed: discarded
    }
    EXPECT_EQ(index.load().models.size(), 1u);
    for (const auto& entry : fs::directory_iterator(paths_.data)) {
        EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos);
    }
    EXPECT_TRUE(fs::is_directory(paths_.artifacts_dir()));
    EXPECT_TRUE(fs::is_directory(paths_.leases_dir()));
}

TEST_F(ModelIndexTest, CorruptIndexNamesTheFile) {
    fs::create_directories(paths_.data);
    std::ofstream(paths_.index_file()) << "{\"format\": 1}";
    try {
        ModelIndex(paths_).load();
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find(paths_.index_file()), std::string::npos);
    }
}

TEST_F(ModelIndexTest, ImportsAreAdoptedOnlyWhenTheirLeaseIsFree) {
    const ModelIndex index(paths_);
    std::string first_id;
    std::optional<Import> live;
    {
        ModelIndex::Transaction transaction = index.begin();
        ImportStart start = start_import(transaction, index, ArtifactKind::Source, "aaaaaaaaaaaa");
        ASSERT_TRUE(start.import.has_value());
        EXPECT_FALSE(start.import->adopted);
        transaction.commit();
        first_id = start.import->artifact_id;
        live = std::move(start.import);
    }
    {
        // The lease is held (by "another process"): the import is reported busy.
        ModelIndex::Transaction transaction = index.begin();
        ImportStart start = start_import(transaction, index, ArtifactKind::Source, "aaaaaaaaaaaa");
        EXPECT_FALSE(start.import.has_value());
        EXPECT_EQ(start.busy_artifact, first_id);
        EXPECT_FALSE(index.try_lease(first_id, LockMode::Shared).has_value());
    }
    live.reset();  // the holder dies
    {
        ModelIndex::Transaction transaction = index.begin();
        ImportStart start = start_import(transaction, index, ArtifactKind::Source, "aaaaaaaaaaaa");
        ASSERT_TRUE(start.import.has_value());
        EXPECT_TRUE(start.import->adopted);
        EXPECT_EQ(start.import->artifact_id, first_id);
        // Another kind for the same model is a separate import.
        ImportStart store = start_import(transaction, index, ArtifactKind::Store, "aaaaaaaaaaaa");
        ASSERT_TRUE(store.import.has_value());
        EXPECT_NE(store.import->artifact_id, first_id);
    }
}

TEST_F(ModelIndexTest, SharedLeasesCoexistAndBlockExclusive) {
    const ModelIndex index(paths_);
    index.begin();
    std::optional<FileLock> reader_a = index.try_lease("0123456789abcdef", LockMode::Shared);
    std::optional<FileLock> reader_b = index.try_lease("0123456789abcdef", LockMode::Shared);
    ASSERT_TRUE(reader_a && reader_b);
    EXPECT_FALSE(index.try_lease("0123456789abcdef", LockMode::Exclusive).has_value());
    reader_a.reset();
    reader_b.reset();
    EXPECT_TRUE(index.try_lease("0123456789abcdef", LockMode::Exclusive).has_value());
}

TEST_F(ModelIndexTest, DirectoryBytesAndRemovalOfArtifactFiles) {
    fs::create_directories(paths_.artifact_dir("0123456789abcdef") + "/sub");
    std::ofstream(paths_.artifact_dir("0123456789abcdef") + "/a") << "12345";
    std::ofstream(paths_.artifact_dir("0123456789abcdef") + "/sub/b") << "123";
    fs::create_directories(paths_.artifacts_dir() + "/.0123456789abcdef.partial-1");
    fs::create_directories(paths_.artifacts_dir() + "/unrecorded");
    EXPECT_EQ(directory_bytes(paths_.artifact_dir("0123456789abcdef")), 8u);
    remove_artifact_files(paths_, "0123456789abcdef");
    EXPECT_FALSE(fs::exists(paths_.artifact_dir("0123456789abcdef")));
    EXPECT_FALSE(fs::exists(paths_.artifacts_dir() + "/.0123456789abcdef.partial-1"));
    EXPECT_TRUE(fs::exists(paths_.artifacts_dir() + "/unrecorded"));
}

}  // namespace
}  // namespace cherenkov::store
