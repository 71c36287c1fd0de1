// A model's store changes through the index (model_store_update.h): a variant build publishes a
// new managed store of hard links while a reader keeps the old one's files and lease, `model gc`
// collects the old store only once that lease is released, loaders get the new store leased,
// metadata is repaired into a new store, and exports never move the model.
#include "store/index/model_store_update.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "base/file.h"
#include "store/index/collect.h"
#include "store/index/model_lookup.h"
#include "store/index/prepare_model.h"
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

const GcReportItem* find_item(const GcReport& report, const std::string& id) {
    for (const GcReportItem& item : report.items) {
        if (item.artifact_id == id) return &item;
    }
    return nullptr;
}

class ModelStoreUpdateTest : public ::testing::Test {
protected:
    ModelStoreUpdateTest() {
        // A copy of the checkpoint, so the test can change its metadata.
        fs::copy(kSource, source_);
        options_.paths.data = (temp_.path() / "data").string();
        options_.hub.endpoint = "http://127.0.0.1:9";  // never contacted
        options_.n_threads = 2;
        PrepareModelOptions prepare;
        prepare.source = source_.string();
        prepare.alias = "tiny";
        first_ = prepare_model(prepare, options_);
    }

    PrepareModelResult prepare(std::vector<int> bits, const std::string& output = "") {
        PrepareModelOptions options;
        options.source = "tiny";
        options.expert_bits = std::move(bits);
        options.output_dir = output;
        return prepare_model(options, options_);
    }

    ModelEntry model() const {
        return *ModelIndex(options_.paths).load().find_model(first_.model_id);
    }

    testing::TempDir temp_;
    fs::path source_ = temp_.path() / "checkpoint";
    IndexOptions options_;
    PrepareModelResult first_;
};

TEST_F(ModelStoreUpdateTest, AVariantBuildPublishesANewStoreAndGcWaitsForTheReader) {
    const std::string old_store = first_.store_dir;
    const std::string old_id = model().store_artifact;
    // A running reader: resolved (shared lease) with its expert table mapped.
    std::optional<ResolvedModel> reader = resolve_model("tiny", options_);
    ASSERT_EQ(reader->store_dir, old_store);
    const std::shared_ptr<const MappedFile> mapped = MappedFile::open(old_store + "/experts.bin");
    const std::string bytes = read_bytes(old_store + "/experts.bin");

    const PrepareModelResult second = prepare({4, 3, 2});
    EXPECT_TRUE(second.store.published);
    EXPECT_EQ(second.store.derived, (std::vector<int>{3, 2}));
    ASSERT_NE(second.store_dir, old_store);
    EXPECT_EQ(model().store_artifact, fs::path(second.store_dir).filename().string());
    struct stat a {
    }, b{};
    ASSERT_EQ(::stat((old_store + "/experts.bin").c_str(), &a), 0);
    ASSERT_EQ(::stat((second.store_dir + "/experts.bin").c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino);                          // hard-linked, not copied
    EXPECT_FALSE(fs::exists(old_store + "/experts3.bin"));  // the old store is unchanged

    // The reader's lease keeps the old store from gc.
    GcReport report = collect_garbage(options_, false);
    const GcReportItem* item = find_item(report, old_id);
    ASSERT_NE(item, nullptr);
    EXPECT_EQ(item->action, "skip");
    EXPECT_EQ(item->reason, "in use");
    EXPECT_TRUE(fs::exists(old_store + "/manifest.json"));
    EXPECT_EQ(
        std::string(reinterpret_cast<const char*>(mapped->bytes().data()), mapped->bytes().size()),
        bytes);

    // Released: the next gc deletes the old store and only it.
    reader.reset();
    report = collect_garbage(options_, false);
    item = find_item(report, old_id);
    ASSERT_NE(item, nullptr);
    EXPECT_EQ(item->action, "delete");
    EXPECT_FALSE(fs::exists(old_store));
    EXPECT_NO_THROW(validate_store(second.store_dir));
    EXPECT_EQ(read_bytes(second.store_dir + "/experts.bin"), bytes);

    // Everything there: reused, nothing published.
    const PrepareModelResult third = prepare({4, 3, 2});
    EXPECT_FALSE(third.store.published);
    EXPECT_EQ(third.store.reused, (std::vector<int>{3, 2}));
    EXPECT_EQ(third.store_dir, second.store_dir);
}

TEST_F(ModelStoreUpdateTest, LoadersGetTheNewStoreLeased) {
    ResolvedModel resolved = resolve_model("tiny", options_);
    const std::string old_store = resolved.store_dir;
    const PrepareResult built = complete_resolved_store(resolved, {3}, options_);
    EXPECT_EQ(built.derived, std::vector<int>{3});
    EXPECT_TRUE(built.published);
    EXPECT_NE(resolved.store_dir, old_store);
    EXPECT_TRUE(fs::exists(resolved.store_dir + "/experts3.bin"));
    const std::string new_id = fs::path(resolved.store_dir).filename().string();
    const ModelIndex index(options_.paths);
    EXPECT_FALSE(index.try_lease(new_id, LockMode::Exclusive).has_value());  // ours, shared
    // The old lease was released: gc collects the old store now.
    collect_garbage(options_, false);
    EXPECT_FALSE(fs::exists(old_store));
    // Nothing missing: nothing done.
    const PrepareResult again = complete_resolved_store(resolved, {3}, options_);
    EXPECT_TRUE(again.derived.empty());
    EXPECT_FALSE(again.published);
}

TEST_F(ModelStoreUpdateTest, PrepareRepairsMetadataIntoANewStore) {
    const std::string old_store = first_.store_dir;
    fs::remove(old_store + "/chat_template.jinja");
    const PrepareModelResult repaired = prepare({4});
    EXPECT_EQ(repaired.store.repaired, std::vector<std::string>{"chat_template.jinja"});
    EXPECT_TRUE(repaired.store.published);
    EXPECT_EQ(read_bytes(repaired.store_dir + "/chat_template.jinja"),
              read_bytes(source_ / "chat_template.jinja"));
    EXPECT_FALSE(fs::exists(old_store + "/chat_template.jinja"));  // readers keep theirs
}

TEST_F(ModelStoreUpdateTest, LoadingIgnoresASourceThatChangedButPrepareRefusesIt) {
    fs::remove(first_.store_dir + "/chat_template.jinja");
    {
        std::ofstream config(source_ / "config.json", std::ios::app);
        config << "\n";  // a different checkpoint now
    }
    try {
        prepare({4});
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("different config.json"), std::string::npos)
            << error.what();
    }
    ResolvedModel resolved = resolve_model("tiny", options_);
    const PrepareResult result = complete_resolved_store(resolved, {4}, options_);
    EXPECT_TRUE(result.repaired.empty());
    EXPECT_EQ(resolved.store_dir, first_.store_dir);
}

TEST_F(ModelStoreUpdateTest, AnExportIsRecordedBesideTheStoreAndSurvivesGc) {
    prepare({4, 3});
    const ModelEntry before = model();
    const fs::path exported = temp_.path() / "export";
    const PrepareModelResult result = prepare({4}, exported.string());
    EXPECT_TRUE(result.exported);
    EXPECT_EQ(result.store_dir, exported.string());
    const ModelEntry after = model();
    EXPECT_EQ(after.store_artifact, before.store_artifact);  // the model did not move
    ASSERT_EQ(after.export_artifacts.size(), 1u);
    collect_garbage(options_, false);
    const Catalog catalog = ModelIndex(options_.paths).load();
    EXPECT_NE(catalog.find_artifact(after.export_artifacts[0]), nullptr);
    const std::string store = options_.paths.artifact_dir(after.store_artifact);
    EXPECT_TRUE(fs::exists(store + "/experts3.bin"));
    EXPECT_TRUE(fs::exists(exported / "manifest.json"));
    EXPECT_EQ(resolve_model("tiny", options_).store_dir, store);
    // Exporting again to the same directory reuses its record.
    prepare({4}, exported.string());
    EXPECT_EQ(model().export_artifacts, after.export_artifacts);
}

}  // namespace
}  // namespace cherenkov::store
