// LoadedModel's promises (issue 28): options are checked before anything loads (mixed mode needs
// Q4 residents, --cut-weak is a routing weight), --drafts 0 leaves the MTP head out, and a
// missing low-bit table is built at load (published as a new store for an indexed model) unless
// build_missing_store is off, when the message names a prepare command that builds it.
#include "engine/runtime/loaded_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/error.h"
#include "store/index/collect.h"
#include "store/index/prepare_model.h"
#include "store/index/resolve_model.h"
#include "store/prepare.h"
#include "support/temp_dir.h"

namespace cherenkov::engine {
namespace {

namespace fs = std::filesystem;

const std::string kSource =
    std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/tiny_a/hf_flat_fused";

std::string invalid_message(const LoadOptions& options) {
    try {
        validate_load_options(options);
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        return error.what();
    }
    ADD_FAILURE() << "accepted";
    return {};
}

LoadOptions cpu_options(const std::string& store_dir) {
    LoadOptions options;
    options.store_dir = store_dir;
    options.backend = "cpu";
    options.threads = 1;
    options.pool = PoolSetting::gb(0);
    return options;
}

// A Q4-only store of the tiny MTP fixture in `directory`.
std::string pack_q4(const testing::TempDir& temp, const std::string& name = "store") {
    store::PrepareOptions options;
    options.source_dir = kSource;
    options.output_dir = temp.file(name);
    options.n_threads = 2;
    store::prepare_store(options);
    return options.output_dir;
}

TEST(LoadOptionsCheck, MixedModeNeedsFourBitResidents) {
    LoadOptions options;
    options.expert_bits = 4;
    options.miss_bits = 2;
    EXPECT_NO_THROW(validate_load_options(options));
    options.expert_bits = 3;
    options.miss_bits = 3;  // uniform Q3, not mixed
    EXPECT_NO_THROW(validate_load_options(options));
    options.miss_bits = 2;
    EXPECT_NE(invalid_message(options).find("--miss-experts 2 needs 4-bit residents"),
              std::string::npos);
    options.expert_bits = 2;
    options.miss_bits = 4;
    EXPECT_NE(invalid_message(options).find("--miss-experts 4"), std::string::npos);
    options.expert_bits = 5;
    options.miss_bits = 0;
    EXPECT_NE(invalid_message(options).find("--experts"), std::string::npos);
}

TEST(LoadOptionsCheck, CutWeakIsARoutingWeight) {
    LoadOptions options;
    for (float ok : {0.0F, 0.08F, 1.0F}) {
        options.cut_weak = ok;
        EXPECT_NO_THROW(validate_load_options(options)) << ok;
    }
    for (float bad : {-1.0F, -0.01F, 1.5F, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
        options.cut_weak = bad;
        EXPECT_NE(invalid_message(options).find("--cut-weak"), std::string::npos) << bad;
    }
    options.cut_weak = -1.0F;
    EXPECT_NE(invalid_message(options).find("--cut-weak -1 is out of range"), std::string::npos);
}

TEST(LoadOptionsCheck, RejectsBeforeTouchingTheStore) {
    LoadOptions options = cpu_options("/nonexistent/store");
    options.cut_weak = 2.0F;
    try {
        LoadedModel::load(options);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);  // not NotFound for the directory
        EXPECT_NE(std::string(error.what()).find("--cut-weak"), std::string::npos);
    }
}

TEST(LoadedModelOptions, AMappedDevicePoolIsRefusedBeforeTheHostSideIsBuilt) {
    testing::TempDir temp;
    LoadOptions options = cpu_options(pack_q4(temp));
    options.backend = "cuda";
    options.pool = PoolSetting::of(PoolMode::Mapped);
    try {
        LoadedModel::load(options);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("--pool-gb mapped"), std::string::npos)
            << error.what();
    }
}

// The caller's parsed config.json is used as it is: load() does not read the file again.
TEST(LoadedModelOptions, AConfigParsedByTheCallerIsNotReadAgain) {
    testing::TempDir temp;
    const std::string store_dir = pack_q4(temp);
    const model_data::qwen4_exp::Config config = load_model_weights(store_dir)->config;
    { std::ofstream(store_dir + "/config.json") << "not json"; }
    LoadOptions options = cpu_options(store_dir);
    options.config = &config;
    const std::unique_ptr<LoadedModel> loaded = LoadedModel::load(options);
    EXPECT_EQ(loaded->weights().config.num_hidden_layers, config.num_hidden_layers);
    options.config = nullptr;
    EXPECT_THROW(LoadedModel::load(options), Error);
}

TEST(LoadedModelDrafts, NoDraftsOmitsTheMtpHead) {
    testing::TempDir temp;
    const std::string store_dir = pack_q4(temp);
    LoadOptions options = cpu_options(store_dir);
    const std::unique_ptr<LoadedModel> with_head = LoadedModel::load(options);
    options.draft_head = false;
    const std::unique_ptr<LoadedModel> without = LoadedModel::load(options);
    EXPECT_TRUE(with_head->model().has_mtp());
    EXPECT_FALSE(without->model().has_mtp());
    EXPECT_FALSE(without->weights().mtp.has_value());
    const nlohmann::json full = with_head->memory_stats(nullptr);
    const nlohmann::json trunk = without->memory_stats(nullptr);
    EXPECT_TRUE(full["draft_head"].get<bool>());
    EXPECT_FALSE(trunk["draft_head"].get<bool>());
    EXPECT_LT(trunk["dense_bytes"].get<uint64_t>(), full["dense_bytes"].get<uint64_t>());
    // No MTP state either: a sequence of the model without the head is smaller.
    EXPECT_LT(without->model().new_sequence(64).bytes(),
              with_head->model().new_sequence(64).bytes());
    // The resident ranges cover no MTP tensor.
    for (const store::DenseTensor& tensor : without->weights().manifest.dense) {
        if (tensor.name.rfind("mtp.", 0) != 0) continue;
        for (const store::ByteRange& range : without->weights().resident_ranges) {
            EXPECT_FALSE(tensor.data.offset < range.end() && range.offset < tensor.data.end())
                << tensor.name;
        }
    }
}

TEST(LoadedModelStores, BuildsAMissingTableInPlaceForADirectoryGivenDirectly) {
    testing::TempDir temp;
    const std::string store_dir = pack_q4(temp, "my store");
    LoadOptions options = cpu_options(store_dir);
    options.expert_bits = 3;
    options.build_missing_store = false;
    try {
        LoadedModel::load(options);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::NotFound);
        // A command that works when pasted: the directory, quoted for the shell.
        EXPECT_NE(
            std::string(error.what()).find("`cherenkov prepare '" + store_dir + "' --experts 3`"),
            std::string::npos)
            << error.what();
    }
    EXPECT_FALSE(fs::exists(store_dir + "/experts3.bin"));
    options.build_missing_store = true;
    const std::unique_ptr<LoadedModel> loaded = LoadedModel::load(options);
    EXPECT_EQ(loaded->expert_bits(), 3);
    EXPECT_EQ(loaded->store_dir(), store_dir);
    EXPECT_TRUE(fs::exists(store_dir + "/experts3.bin"));
}

TEST(LoadedModelStores, AnIndexedModelGetsANewStoreAndTheOldOneWaitsForGc) {
    testing::TempDir temp;
    store::IndexOptions index;
    index.paths.data = temp.file("data");
    index.root = temp.file("data");
    index.hub.endpoint = "http://127.0.0.1:9";  // never contacted
    store::PrepareModelOptions prepare;
    prepare.source = kSource;
    prepare.alias = "tiny";
    store::prepare_model(prepare, index);

    store::ResolvedModel resolved = store::resolve_model("tiny", index);
    const std::string old_store = resolved.store_dir;
    LoadOptions options = cpu_options(resolved.store_dir);
    options.index = index;
    options.resolved = &resolved;
    options.expert_bits = 4;
    options.miss_bits = 2;
    options.build_missing_store = false;
    try {
        LoadedModel::load(options);
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what())
                      .find("`cherenkov prepare tiny --experts 2 --root " + index.paths.data + "`"),
                  std::string::npos)
            << error.what();
    }
    options.build_missing_store = true;
    const std::unique_ptr<LoadedModel> loaded = LoadedModel::load(options);
    EXPECT_NE(resolved.store_dir, old_store);
    EXPECT_EQ(loaded->store_dir(), resolved.store_dir);
    EXPECT_TRUE(fs::exists(resolved.store_dir + "/experts2.bin"));
    EXPECT_FALSE(fs::exists(old_store + "/experts2.bin"));
    // The old store is unreferenced and unleased now: gc takes it, not the loaded one.
    store::collect_garbage(index, false);
    EXPECT_FALSE(fs::exists(old_store));
    EXPECT_TRUE(fs::exists(resolved.store_dir + "/experts2.bin"));
}

}  // namespace
}  // namespace cherenkov::engine
