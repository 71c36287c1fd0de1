#include "engine/experts/expert_source_factory.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/experts/direct_expert_reader.h"
#include "engine/experts/expert_cache.h"
#include "engine/experts/expert_test_tables.h"
#include "store/prepare.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;

ExpertSourceOptions options_for(const ExpertTable& table, const char* pool_gb) {
    ExpertSourceOptions options;
    options.cache.tables[4] = table;
    options.pool = parse_pool_setting(pool_gb);
    options.max_rows = 2;
    options.top_k = 3;
    return options;
}

TEST(ExpertSourceFactory, PoolZeroReadsDirectly) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 8);
    const BuiltExpertSource built = make_expert_source(options_for(table, "0"));
    EXPECT_NE(dynamic_cast<DirectExpertReader*>(built.source.get()), nullptr);
    EXPECT_EQ(built.budget.n_slots, 0u);
}

TEST(ExpertSourceFactory, ExplicitPoolBuildsTheCache) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 8);
    // 0.0001 GB = 100 000 bytes = 12 slots of 8192 bytes.
    const BuiltExpertSource built = make_expert_source(options_for(table, "0.0001"));
    auto* cache = dynamic_cast<ExpertCache*>(built.source.get());
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->n_slots(), 12u);
    EXPECT_EQ(built.budget.n_slots, 12u);
    const std::vector<ExpertRequest> wanted{{1, 0.5F}, {2, 0.25F}};
    std::unique_ptr<ExpertBatch> batch = cache->fetch(1, wanted);
    size_t index = 0;
    ExpertWeights weights;
    int delivered = 0;
    while (batch->next(&index, &weights)) {
        EXPECT_TRUE(testing::record_matches(testing::record_of(weights), table.layout, 1,
                                            wanted[index].expert, 4));
        ++delivered;
    }
    EXPECT_EQ(delivered, 2);
}

TEST(ExpertSourceFactory, PoolBelowOneStepFailsAtStartup) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 8);
    // 40 000 bytes = 4 slots < 2 rows · top-3.
    try {
        make_expert_source(options_for(table, "0.00004"));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(e.what()).find("one layer-step can select 6"), std::string::npos)
            << e.what();
    }
}

TEST(ExpertSourceFactory, MaxHoldsTheWholeTable) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 8);
    const BuiltExpertSource built = make_expert_source(options_for(table, "max"));
    EXPECT_EQ(built.budget.n_slots, 16u);
}

TEST(ExpertSourceFactory, FindsAStoreTablesAndNamesAMissingOne) {
    TempDir dir;
    const std::vector<int> bits{2};
    try {
        find_expert_tables(dir.path().string(), bits);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("manifest2.json"), std::string::npos);
        // A command that works when pasted: it names the store.
        EXPECT_NE(std::string(e.what()).find("`cherenkov prepare " + dir.path().string() +
                                             " --experts 2`"),
                  std::string::npos)
            << e.what();
    }
}

// A real packed store (the tiny_c fixture with Q4 and Q2 tables): a mixed-mode cache with a pool
// of one step delivers, for every record, exactly the bytes the direct reader reads.
TEST(ExpertSourceFactory, CacheDeliversThePackedStoreBytes) {
    TempDir dir;
    store::PrepareOptions prepare;
    prepare.source_dir = std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/tiny_c/mlx_q4";
    prepare.output_dir = dir.file("store");
    prepare.expert_bits = {4, 2};
    prepare.n_threads = 1;
    store::prepare_store(prepare);
    const std::vector<int> bits{4, 2};
    const ExpertTables tables = find_expert_tables(prepare.output_dir, bits);
    ASSERT_EQ(tables.at(2).layout.bits, 2);

    ExpertSourceOptions options;
    options.cache.tables = tables;
    options.cache.miss_bits = 2;
    options.max_rows = 1;
    options.top_k = 2;
    const uint64_t slot_bytes = tables.at(4).layout.record_bytes;
    options.pool = PoolSetting{.mode = PoolMode::Explicit, .bytes = 2 * slot_bytes};
    const BuiltExpertSource built = make_expert_source(options);
    ASSERT_EQ(built.budget.n_slots, 2u);
    DirectExpertReader q4(tables.at(4).path, tables.at(4).layout);
    DirectExpertReader q2(tables.at(2).path, tables.at(2).layout);

    const store::ExpertLayout& layout = tables.at(4).layout;
    for (int64_t layer = 0; layer < layout.n_layers(); ++layer) {
        for (int32_t expert = 0; expert + 1 < layout.n_experts; expert += 2) {
            // Predict the first of each pair so it reads at Q4; the second misses at Q2.
            built.source->predict(layer, std::vector<int32_t>{expert});
            const std::vector<ExpertRequest> wanted{{expert, 0.6F}, {expert + 1, 0.4F}};
            std::unique_ptr<ExpertBatch> batch = built.source->fetch(layer, wanted);
            size_t index = 0;
            ExpertWeights weights;
            while (batch->next(&index, &weights)) {
                DirectExpertReader& reference = weights.bits == 4 ? q4 : q2;
                EXPECT_EQ(weights.bits, index == 0 ? 4 : 2);
                const std::vector<ExpertRequest> one{wanted[index]};
                std::unique_ptr<ExpertBatch> direct = reference.fetch(layer, one);
                size_t direct_index = 0;
                ExpertWeights expected;
                ASSERT_TRUE(direct->next(&direct_index, &expected));
                const uint64_t n_bytes = tables.at(weights.bits).layout.record_bytes;
                EXPECT_EQ(
                    std::memcmp(testing::record_of(weights), testing::record_of(expected), n_bytes),
                    0)
                    << "layer " << layer << " expert " << wanted[index].expert;
                EXPECT_EQ(weights.gate.rows, expected.gate.rows);
                EXPECT_EQ(weights.down.scales -
                              reinterpret_cast<const uint16_t*>(testing::record_of(weights)),
                          expected.down.scales -
                              reinterpret_cast<const uint16_t*>(testing::record_of(expected)));
            }
        }
    }
}

}  // namespace
}  // namespace cherenkov::engine
