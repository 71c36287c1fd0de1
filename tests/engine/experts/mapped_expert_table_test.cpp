#include "engine/experts/mapped_expert_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "engine/experts/expert_source_factory.h"
#include "engine/experts/expert_test_tables.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;

TEST(MappedExpertTable, DeliversEveryRequestedRecordInPlaceInRequestOrder) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 3, 8);
    MappedExpertTable mapped(table.path, table.layout);
    const RecordMemory memory = mapped.record_memory();
    ASSERT_EQ(memory.bytes.size(), table.layout.file_bytes());
    EXPECT_TRUE(memory.read_only);

    const std::vector<ExpertRequest> wanted{{5, 0.5F}, {0, 0.3F}, {7, 0.2F}};
    std::unique_ptr<ExpertBatch> batch = mapped.fetch(2, wanted);
    size_t index = 0;
    ExpertWeights weights;
    std::vector<size_t> order;
    while (batch->next(&index, &weights)) {
        order.push_back(index);
        const std::byte* record = testing::record_of(weights);
        EXPECT_EQ(record,
                  memory.bytes.data() + table.layout.record_offset(2, wanted[index].expert));
        EXPECT_TRUE(testing::record_matches(record, table.layout, 2, wanted[index].expert, 4));
        EXPECT_EQ(weights.bits, 4);
        EXPECT_EQ(weights.gate.rows, static_cast<int64_t>(table.layout.gate.rows));
    }
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));
    EXPECT_EQ(mapped.records_served(), 3u);
    EXPECT_EQ(mapped.bytes_served(), 3 * table.layout.record_bytes);
    EXPECT_TRUE(batch->cut_requests().empty());
}

TEST(MappedExpertTable, RejectsRequestsOutsideTheTable) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 4);
    MappedExpertTable mapped(table.path, table.layout);
    const std::vector<ExpertRequest> fine{{1, 1.0F}};
    const std::vector<ExpertRequest> past{{4, 1.0F}};
    const std::vector<ExpertRequest> negative{{-1, 1.0F}};
    for (const auto& [layer, requests] :
         {std::pair{int64_t{2}, fine}, std::pair{int64_t{-1}, fine}, std::pair{int64_t{0}, past},
          std::pair{int64_t{1}, negative}}) {
        try {
            mapped.fetch(layer, requests);
            FAIL() << "layer " << layer;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << e.what();
        }
    }
    EXPECT_EQ(mapped.records_served(), 0u);
}

TEST(MappedExpertTable, NamesAFileOfTheWrongSizeOrAMissingOne) {
    TempDir dir;
    const ExpertTable table = testing::write_test_table(dir, "experts.bin", 4, 2, 4);
    std::filesystem::resize_file(table.path, table.layout.file_bytes() - 4096);
    try {
        MappedExpertTable mapped(table.path, table.layout);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(e.what()).find(table.path), std::string::npos) << e.what();
    }
    try {
        MappedExpertTable mapped(dir.file("absent.bin"), table.layout);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("absent.bin"), std::string::npos) << e.what();
    }
}

TEST(MappedExpertTable, TheFactoryBuildsItAndRefusesMixedPrecision) {
    TempDir dir;
    ExpertSourceOptions options;
    options.cache.tables[4] = testing::write_test_table(dir, "experts.bin", 4, 2, 8);
    options.cache.tables[2] = testing::write_test_table(dir, "experts2.bin", 2, 2, 8);
    options.pool = PoolSetting::of(PoolMode::Mapped);
    options.max_rows = 2;
    options.top_k = 3;
    const BuiltExpertSource built = make_expert_source(options);
    EXPECT_NE(dynamic_cast<MappedExpertTable*>(built.source.get()), nullptr);
    EXPECT_EQ(built.budget.n_slots, 0u);
    EXPECT_NE(built.budget.description.find("mapped"), std::string::npos);

    options.cache.miss_bits = 2;
    try {
        make_expert_source(options);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(e.what()).find("--miss-experts"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cherenkov::engine
