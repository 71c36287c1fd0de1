// Changes to existing stores (store_update.h): what plan_store_changes finds missing, in-place
// changes, and publishing a changed copy whose unchanged files are hard links while a reader of
// the old store keeps its mapping.
#include "store/store_update.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "base/file.h"
#include "store/prepare.h"
#include "store/store_check.h"
#include "support/temp_dir.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

const std::string kSource =
    std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/tiny_a/hf_flat_fused";

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

ino_t inode(const fs::path& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return info.st_ino;
}

class StoreUpdate : public ::testing::Test {
protected:
    StoreUpdate() {
        PrepareOptions options;
        options.source_dir = kSource;
        options.output_dir = store_.string();
        options.n_threads = 2;
        prepare_store(options);
    }

    testing::TempDir temp_;
    fs::path store_ = temp_.path() / "store";
};

TEST_F(StoreUpdate, PlansOnlyWhatIsMissing) {
    StoreChanges changes = plan_store_changes(store_.string(), std::vector<int>{4, 3}, "");
    EXPECT_EQ(changes.missing_bits, std::vector<int>{3});
    EXPECT_TRUE(changes.valid_bits.empty());
    EXPECT_TRUE(changes.missing_metadata.empty());
    apply_store_changes(store_.string(), changes, {});
    changes = plan_store_changes(store_.string(), std::vector<int>{3, 2}, kSource);
    EXPECT_EQ(changes.valid_bits, std::vector<int>{3});
    EXPECT_EQ(changes.missing_bits, std::vector<int>{2});
    EXPECT_TRUE(changes.missing_metadata.empty());  // every metadata file is there
}

TEST_F(StoreUpdate, FillsMissingMetadataFromTheSource) {
    fs::remove(store_ / "chat_template.jinja");
    fs::remove(store_ / "config.json");
    // Without a source nothing can be filled, and a store without config.json is invalid.
    EXPECT_THROW(plan_store_changes(store_.string(), std::vector<int>{4}, ""), Error);
    const StoreChanges changes = plan_store_changes(store_.string(), std::vector<int>{4}, kSource);
    EXPECT_EQ(changes.missing_metadata,
              (std::vector<std::string>{"config.json", "chat_template.jinja"}));
    apply_store_changes(store_.string(), changes, {kSource, 1, {}});
    EXPECT_EQ(read_bytes(store_ / "chat_template.jinja"),
              read_bytes(fs::path(kSource) / "chat_template.jinja"));
    EXPECT_NO_THROW(validate_store(store_.string()));
    EXPECT_TRUE(plan_store_changes(store_.string(), std::vector<int>{4}, kSource).empty());
}

TEST_F(StoreUpdate, PublishesANewStoreOfHardLinksAndLeavesTheOldOneWhole) {
    const fs::path next = temp_.path() / "next";
    fs::remove(store_ / "chat_template.jinja");
    // A reader of the old store: an open mapping of its expert table.
    const std::shared_ptr<const MappedFile> reader =
        MappedFile::open((store_ / "experts.bin").string());
    const std::string before = read_bytes(store_ / "experts.bin");
    const StoreChanges changes =
        plan_store_changes(store_.string(), std::vector<int>{3, 2}, kSource);
    ASSERT_EQ(changes.missing_bits, (std::vector<int>{3, 2}));
    publish_changed_store(store_.string(), next.string(), changes, {kSource, 2, {}});

    // The new store is complete; its unchanged files are the old store's (same inodes).
    EXPECT_NO_THROW(validate_store(next.string()));
    const StoreManifest manifest = validate_store(next.string());
    EXPECT_NO_THROW(validate_lowbit_store(next.string(), 3, manifest));
    EXPECT_NO_THROW(validate_lowbit_store(next.string(), 2, manifest));
    for (const char* name : {"experts.bin", "dense.bin", "ngram.bin", "manifest.json"})
        EXPECT_EQ(inode(store_ / name), inode(next / name)) << name;
    EXPECT_TRUE(fs::exists(next / "chat_template.jinja"));
    // The old store is as it was, and no temporary directory is left beside the new one.
    EXPECT_FALSE(fs::exists(store_ / "experts3.bin"));
    EXPECT_FALSE(fs::exists(store_ / "chat_template.jinja"));
    for (const auto& entry : fs::directory_iterator(temp_.path()))
        EXPECT_EQ(entry.path().filename().string().find(".partial-"), std::string::npos);

    // Collecting the old store leaves the reader's mapping and the new store intact.
    fs::remove_all(store_);
    const auto mapped = reader->bytes();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.data()), mapped.size()), before);
    EXPECT_NO_THROW(validate_store(next.string()));
}

TEST_F(StoreUpdate, RebuildsAnInvalidTableWithoutTouchingTheOldOne) {
    StoreChanges changes = plan_store_changes(store_.string(), std::vector<int>{3}, "");
    apply_store_changes(store_.string(), changes, {});
    fs::resize_file(store_ / "experts3.bin", 4096);  // damaged
    changes = plan_store_changes(store_.string(), std::vector<int>{3}, "");
    ASSERT_EQ(changes.missing_bits, std::vector<int>{3});
    const fs::path next = temp_.path() / "next";
    publish_changed_store(store_.string(), next.string(), changes, {});
    EXPECT_EQ(fs::file_size(store_ / "experts3.bin"), 4096u);
    EXPECT_NE(inode(store_ / "experts3.bin"), inode(next / "experts3.bin"));
    EXPECT_NO_THROW(validate_lowbit_store(next.string(), 3, changes.manifest));
}

TEST_F(StoreUpdate, RepackRebuildsAValidTableAsANewFile) {
    StoreChanges changes = plan_store_changes(store_.string(), std::vector<int>{3}, "");
    apply_store_changes(store_.string(), changes, {});
    // Valid, so only a requested rebuild lists it; widths not requested are not rebuilt.
    EXPECT_TRUE(plan_store_changes(store_.string(), std::vector<int>{3}, "").empty());
    changes = plan_store_changes(store_.string(), std::vector<int>{3}, "", std::vector<int>{3, 2});
    ASSERT_EQ(changes.missing_bits, std::vector<int>{3});
    EXPECT_TRUE(changes.valid_bits.empty());
    const fs::path next = temp_.path() / "repacked";
    publish_changed_store(store_.string(), next.string(), changes, {});
    EXPECT_NE(inode(store_ / "experts3.bin"), inode(next / "experts3.bin"));
    EXPECT_EQ(inode(store_ / "experts.bin"), inode(next / "experts.bin"));
    EXPECT_EQ(fs::file_size(store_ / "experts3.bin"), fs::file_size(next / "experts3.bin"));
    EXPECT_NO_THROW(validate_lowbit_store(next.string(), 3, changes.manifest));
}

TEST_F(StoreUpdate, RefusesToPublishOverAnExistingDirectory) {
    const StoreChanges changes = plan_store_changes(store_.string(), std::vector<int>{3}, "");
    try {
        publish_changed_store(store_.string(), store_.string(), changes, {});
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("already exists"), std::string::npos);
    }
}

TEST(PackedConfig, DisablesMtpOnlyWhenTheCheckpointHasNone) {
    const std::string text =
        R"({"mtp_num_hidden_layers": 1, "text_config": {"mtp_num_hidden_layers": 1}})";
    EXPECT_EQ(packed_config_text(text, true, "config.json"), text);
    const nlohmann::json packed =
        nlohmann::json::parse(packed_config_text(text, false, "config.json"));
    EXPECT_EQ(packed["mtp_num_hidden_layers"], 0);
    EXPECT_EQ(packed["text_config"]["mtp_num_hidden_layers"], 0);
    const std::string none = R"({"mtp_num_hidden_layers": 0})";
    EXPECT_EQ(packed_config_text(none, false, "config.json"), none);
    EXPECT_THROW(packed_config_text("[1]", false, "config.json"), Error);
}

}  // namespace
}  // namespace cherenkov::store
