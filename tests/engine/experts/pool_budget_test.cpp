#include "engine/experts/pool_budget.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/temp_dir.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;

constexpr uint64_t kRecord = 2'764'800;  // FN Q4 record

// Fake /proc and cgroup files in a temp dir; absent files mean "no such limit".
MemorySources fake_sources(const TempDir& dir) {
    MemorySources sources;
    sources.meminfo_path = dir.file("meminfo");
    sources.cgroup_v2_max_path = dir.file("memory.max");
    sources.cgroup_v2_current_path = dir.file("memory.current");
    sources.cgroup_v1_limit_path = dir.file("memory.limit_in_bytes");
    sources.cgroup_v1_usage_path = dir.file("memory.usage_in_bytes");
    return sources;
}

std::string meminfo_with_available_kib(uint64_t kib) {
    return "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   " +
           std::to_string(kib) + " kB\nBuffers:          100 kB\n";
}

PoolRequirements fn_requirements() {
    PoolRequirements req;
    req.slot_bytes = kRecord;
    req.n_table_records = uint64_t{41} * 512;
    req.step_records = uint64_t{4} * 10;  // token + 3 drafts, top-10
    return req;
}

TEST(PoolSetting, ParsesDecimalGbMaxAndAdaptive) {
    EXPECT_EQ(parse_pool_setting("adaptive").mode, PoolMode::Adaptive);
    EXPECT_EQ(parse_pool_setting("max").mode, PoolMode::Max);
    const PoolSetting twelve = parse_pool_setting("12");
    EXPECT_EQ(twelve.mode, PoolMode::Explicit);
    EXPECT_EQ(twelve.bytes, 12'000'000'000u);
    EXPECT_EQ(parse_pool_setting("0.5").bytes, 500'000'000u);
    EXPECT_EQ(parse_pool_setting("1.25").bytes, 1'250'000'000u);
    EXPECT_EQ(parse_pool_setting(" 3 ").bytes, 3'000'000'000u);
    EXPECT_EQ(parse_pool_setting("0").bytes, 0u);
}

TEST(PoolSetting, RejectsMalformedValuesNamingThem) {
    for (const char* bad : {"", "-1", "abc", "1.2.3", "12GB", ".", "1e3", "nan", "Max"}) {
        try {
            parse_pool_setting(bad);
            FAIL() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
            EXPECT_NE(std::string(e.what()).find("--pool-gb '" + std::string(bad) + "'"),
                      std::string::npos)
                << e.what();
        }
    }
}

TEST(PoolBudget, ExplicitFloorsToWholeSlots) {
    const PoolBudget budget = resolve_pool_budget(parse_pool_setting("1"), fn_requirements());
    EXPECT_EQ(budget.mode, PoolMode::Explicit);
    EXPECT_EQ(budget.n_slots, 1'000'000'000u / kRecord);  // 361
    EXPECT_EQ(budget.bytes, budget.n_slots * kRecord);
}

TEST(PoolBudget, ExplicitZeroMeansNoCache) {
    const PoolBudget budget = resolve_pool_budget(parse_pool_setting("0"), fn_requirements());
    EXPECT_EQ(budget.n_slots, 0u);
}

TEST(PoolBudget, ExplicitPoolBelowOneStepFailsSayingTheMinimum) {
    try {
        resolve_pool_budget(parse_pool_setting("0.1"), fn_requirements());  // 36 slots < 40
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        const std::string message = e.what();
        EXPECT_NE(message.find("holds 36 expert records"), std::string::npos) << message;
        EXPECT_NE(message.find("can select 40"), std::string::npos) << message;
        EXPECT_NE(message.find("--pool-gb 0.111"), std::string::npos) << message;
    }
    // Exactly one step's union is enough.
    EXPECT_EQ(resolve_pool_budget(parse_pool_setting("0.111"), fn_requirements()).n_slots, 40u);
}

TEST(PoolBudget, ExplicitAndMaxNeverExceedTheTable) {
    PoolRequirements req = fn_requirements();
    req.n_table_records = 30;  // a tiny table smaller than one step's union fits entirely
    EXPECT_EQ(resolve_pool_budget(parse_pool_setting("100"), req).n_slots, 30u);
    EXPECT_EQ(resolve_pool_budget(parse_pool_setting("max"), req).n_slots, 30u);
    EXPECT_EQ(resolve_pool_budget(parse_pool_setting("max"), fn_requirements()).n_slots, 41u * 512);
}

TEST(PoolBudget, AdaptiveUsesMemAvailableMinusHeadroomAndFixedBuffers) {
    TempDir dir;
    dir.write("meminfo", meminfo_with_available_kib(20'000'000));  // 20.48 GB
    PoolRequirements req = fn_requirements();
    req.fixed_bytes = 4'000'000'000;
    req.reserve_bytes = 1'000'000'000;  // below the 6 GB floor: the floor applies
    const PoolBudget budget = resolve_pool_budget({}, req, fake_sources(dir));
    EXPECT_EQ(budget.mode, PoolMode::Adaptive);
    EXPECT_EQ(budget.n_slots, (20'480'000'000u - 4'000'000'000u - 6'000'000'000u) / kRecord);

    req.reserve_bytes = 8'000'000'000;  // a larger scratch allowance wins over the floor
    EXPECT_EQ(resolve_pool_budget({}, req, fake_sources(dir)).n_slots,
              (20'480'000'000u - 4'000'000'000u - 8'000'000'000u) / kRecord);
}

TEST(PoolBudget, AdaptiveRespectsCgroupV2Limit) {
    TempDir dir;
    dir.write("meminfo", meminfo_with_available_kib(60'000'000));
    dir.write("memory.max", "16000000000\n");
    dir.write("memory.current", "2000000000\n");
    const AvailableMemory memory = read_available_memory(fake_sources(dir));
    ASSERT_TRUE(memory.cgroup_limit_bytes.has_value());
    EXPECT_EQ(memory.usable_bytes(), 14'000'000'000u);
    PoolRequirements req = fn_requirements();
    req.min_headroom_bytes = 2'000'000'000;
    EXPECT_EQ(resolve_pool_budget({}, req, fake_sources(dir)).n_slots, 12'000'000'000u / kRecord);
}

TEST(PoolBudget, CgroupV2MaxAndV1UnlimitedMeanNoLimit) {
    TempDir dir;
    dir.write("meminfo", meminfo_with_available_kib(1'000'000));
    dir.write("memory.max", "max\n");
    EXPECT_FALSE(read_available_memory(fake_sources(dir)).cgroup_limit_bytes.has_value());

    TempDir v1;
    v1.write("meminfo", meminfo_with_available_kib(1'000'000));
    v1.write("memory.limit_in_bytes", "9223372036854771712\n");
    EXPECT_FALSE(read_available_memory(fake_sources(v1)).cgroup_limit_bytes.has_value());
}

TEST(PoolBudget, AdaptiveRespectsCgroupV1Limit) {
    TempDir dir;
    dir.write("meminfo", meminfo_with_available_kib(60'000'000));
    dir.write("memory.limit_in_bytes", "10000000000\n");
    dir.write("memory.usage_in_bytes", "1000000000\n");
    EXPECT_EQ(read_available_memory(fake_sources(dir)).usable_bytes(), 9'000'000'000u);
}

TEST(PoolBudget, AdaptiveRaisesToOneStepWhenMemoryAllowsElseFails) {
    TempDir dir;
    dir.write("meminfo", meminfo_with_available_kib(4'000'000));  // 4.096 GB < 6 GB headroom
    const PoolBudget raised = resolve_pool_budget({}, fn_requirements(), fake_sources(dir));
    EXPECT_EQ(raised.n_slots, 40u);
    EXPECT_NE(raised.description.find("raised to one layer-step"), std::string::npos);

    dir.write("meminfo", meminfo_with_available_kib(50'000));  // 51 MB < 40 records
    try {
        resolve_pool_budget({}, fn_requirements(), fake_sources(dir));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::ResourceExhausted);
        EXPECT_NE(std::string(e.what()).find("not enough memory for the expert pool"),
                  std::string::npos);
    }
}

TEST(PoolBudget, MalformedMeminfoNamesTheFile) {
    TempDir dir;
    dir.write("meminfo", "MemTotal: 100 kB\n");
    try {
        read_available_memory(fake_sources(dir));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(e.what()).find(dir.file("meminfo")), std::string::npos);
    }
    dir.write("meminfo", meminfo_with_available_kib(100));
    dir.write("memory.max", "lots\n");
    EXPECT_THROW(read_available_memory(fake_sources(dir)), Error);
}

// A device plan like the CUDA backend's: 20 GB free after the weights, 1 GB of sequence caches,
// FN Q4 slots, and a 152k-vocabulary model's prefill scratch per row.
PoolRequirements device_requirements() {
    PoolRequirements req = fn_requirements();
    req.fixed_bytes = 1'000'000'000;
    req.min_headroom_bytes = uint64_t{1} << 30;
    req.measured_usable_bytes = 20'000'000'000;
    return req;
}

ChunkScratch fn_scratch(int64_t quantum) {
    ChunkScratch scratch;
    scratch.quantum = quantum;
    scratch.min_rows = 4;
    scratch.row_bytes = 151'936 * 8 * 4;
    scratch.fixed_bytes = uint64_t{512} << 20;
    return scratch;
}

// The largest value a message suggests after `flag` ("--prefill-quantum 123" → 123).
double suggested(const std::string& message, const std::string& flag) {
    const size_t at = message.find("at most " + flag + " ");
    if (at == std::string::npos) return -1.0;
    return std::stod(message.substr(at + 9 + flag.size()));
}

TEST(PrefillChunkFit, AdaptivePoolLeavesTheWholeQuantum) {
    for (const int64_t quantum : {int64_t{1}, int64_t{256}, int64_t{2048}}) {
        PoolRequirements req = device_requirements();
        req.reserve_bytes = fn_scratch(quantum).bytes(quantum);
        const PoolBudget budget = resolve_pool_budget({}, req);
        const ChunkFit fit = fit_prefill_chunk({}, budget, req, fn_scratch(quantum));
        EXPECT_EQ(fit.rows, quantum);
        EXPECT_EQ(fit.scratch_bytes, fn_scratch(quantum).bytes(quantum));
        EXPECT_LE(budget.bytes + req.fixed_bytes + fit.scratch_bytes, *req.measured_usable_bytes);
    }
    // A larger quantum leaves a smaller pool.
    PoolRequirements small = device_requirements();
    small.reserve_bytes = fn_scratch(128).bytes(128);
    PoolRequirements large = device_requirements();
    large.reserve_bytes = fn_scratch(8192).bytes(8192);
    EXPECT_GT(resolve_pool_budget({}, small).n_slots, resolve_pool_budget({}, large).n_slots);
}

TEST(PrefillChunkFit, AdaptivePoolRaisedToOneStepShrinksTheChunk) {
    PoolRequirements req = device_requirements();
    req.measured_usable_bytes = 2'000'000'000;  // 1 GB after the caches: 40 slots take 0.11 GB
    req.reserve_bytes = fn_scratch(4096).bytes(4096);  // 20.4 GB
    const PoolBudget budget = resolve_pool_budget({}, req);
    EXPECT_EQ(budget.n_slots, 40u);
    const ChunkFit fit = fit_prefill_chunk({}, budget, req, fn_scratch(4096));
    EXPECT_GE(fit.rows, 4);
    EXPECT_LT(fit.rows, 4096);
    EXPECT_LE(budget.bytes + req.fixed_bytes + fit.scratch_bytes, *req.measured_usable_bytes);
    EXPECT_NE(fit.description.find("--prefill-quantum 4096 does not fit"), std::string::npos)
        << fit.description;
    // With nothing left the chunk is still a decode step's rows.
    req.measured_usable_bytes = req.fixed_bytes + budget.bytes;
    EXPECT_EQ(fit_prefill_chunk({}, budget, req, fn_scratch(4096)).rows, 4);
}

TEST(PrefillChunkFit, ExplicitPoolThatLeavesTooLittleScratchFailsNamingBoth) {
    PoolRequirements req = device_requirements();
    const PoolSetting setting = parse_pool_setting("17");
    const PoolBudget budget = resolve_pool_budget(setting, req);
    // 17 GB pool + 1 GB caches leave ~2 GB: 256 rows (1.78 GB) fit, 1024 (5.5 GB) do not.
    EXPECT_EQ(fit_prefill_chunk(setting, budget, req, fn_scratch(256)).rows, 256);
    try {
        fit_prefill_chunk(setting, budget, req, fn_scratch(1024));
        FAIL() << "a 1024-row chunk was fitted beside a 17 GB pool";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        const std::string message = e.what();
        for (const char* part : {"--pool-gb 17.000 GB", "--prefill-quantum 1024", "20.000 GB free",
                                 "1.000 GB", "or --pool-gb adaptive"}) {
            EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
        }
        // Each suggestion fits on its own.
        const double rows = suggested(message, "--prefill-quantum");
        ASSERT_GT(rows, 256.0) << message;
        EXPECT_NO_THROW(
            fit_prefill_chunk(setting, budget, req, fn_scratch(static_cast<int64_t>(rows))));
        EXPECT_THROW(
            fit_prefill_chunk(setting, budget, req, fn_scratch(static_cast<int64_t>(rows) + 1)),
            Error);
        const double gb = suggested(message, "--pool-gb");
        ASSERT_GT(gb, 0.0) << message;
        const PoolSetting smaller = parse_pool_setting(std::to_string(gb));
        EXPECT_NO_THROW(
            fit_prefill_chunk(smaller, resolve_pool_budget(smaller, req), req, fn_scratch(1024)));
    }
}

TEST(PrefillChunkFit, MaxPoolIsCheckedLikeAnExplicitOne) {
    PoolRequirements req = device_requirements();
    req.measured_usable_bytes = 60'000'000'000;  // the FN table is 58 GB
    const PoolSetting max{.mode = PoolMode::Max, .bytes = 0};
    const PoolBudget budget = resolve_pool_budget(max, req);
    try {
        fit_prefill_chunk(max, budget, req, fn_scratch(256));
        FAIL();
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("--pool-gb max leaves too little memory"), std::string::npos)
            << message;
        EXPECT_NE(message.find("--prefill-quantum 256"), std::string::npos) << message;
    }
}

// An automatic quantum beside an explicit pool smaller than the table grows into the memory the
// pool leaves (here 20 GB free, 1 GB of caches, 1 GiB headroom), never past the streaming rows;
// an adaptive pool smaller than the table, or no room, leave it as it is.
TEST(PrefillChunkFit, AutomaticQuantumGrowsWhereTheExpertsStream) {
    PoolRequirements req = device_requirements();
    const PoolSetting setting = parse_pool_setting("5");
    const PoolBudget budget = resolve_pool_budget(setting, req);
    ASSERT_LT(budget.n_slots, req.n_table_records);
    const ChunkScratch scratch = fn_scratch(512);
    // 20 - 5 - 1 - 0.54 - 1.07 GB left: about 2,600 rows of 4.86 MB.
    const int64_t grown = grown_prefill_quantum(setting, budget, req, scratch, 4096, 2048);
    const uint64_t left = *req.measured_usable_bytes - budget.bytes - req.fixed_bytes -
                          scratch.fixed_bytes - req.min_headroom_bytes;
    EXPECT_EQ(grown, static_cast<int64_t>(left / scratch.row_bytes));
    EXPECT_GT(grown, 2000);
    EXPECT_LT(grown, 4096);
    // The grown chunk fits beside the pool as an explicit quantum would.
    EXPECT_EQ(fit_prefill_chunk(setting, budget, req, fn_scratch(grown)).rows, grown);
    EXPECT_EQ(grown_prefill_quantum(setting, budget, req, scratch, 1024, 2048), 1024);
    EXPECT_EQ(grown_prefill_quantum(setting, budget, req, scratch, 256, 2048), 512);

    // 15 GB of pool leave less than the quantum's rows: the quantum stays.
    const PoolSetting large = parse_pool_setting("15");
    EXPECT_EQ(
        grown_prefill_quantum(large, resolve_pool_budget(large, req), req, scratch, 4096, 2048),
        512);
    // An adaptive pool smaller than the table took the memory for experts.
    req.reserve_bytes = scratch.bytes(512);
    const PoolBudget adaptive = resolve_pool_budget({}, req);
    ASSERT_LT(adaptive.n_slots, req.n_table_records);
    EXPECT_EQ(grown_prefill_quantum({}, adaptive, req, scratch, 4096, 2048), 512);
}

// A pool of any kind that holds the whole table grows an automatic quantum toward the resident
// rows instead (its expert GEMMs reuse each weight across more tokens), as far as the memory left
// beside the table holds.
TEST(PrefillChunkFit, AutomaticQuantumGrowsBesideAWholeTable) {
    PoolRequirements roomy = device_requirements();
    roomy.measured_usable_bytes = 200'000'000'000;
    roomy.reserve_bytes = fn_scratch(512).bytes(512);
    const ChunkScratch scratch = fn_scratch(512);
    const PoolSetting max{.mode = PoolMode::Max, .bytes = 0};
    const PoolBudget whole = resolve_pool_budget(max, roomy);
    ASSERT_EQ(whole.n_slots, roomy.n_table_records);
    EXPECT_EQ(grown_prefill_quantum(max, whole, roomy, scratch, 4096, 2048), 2048);
    EXPECT_EQ(fit_prefill_chunk(max, whole, roomy, fn_scratch(2048)).rows, 2048);
    // An explicit pool as large as the table, and an adaptive one that came to hold it.
    const PoolSetting explicit_whole = parse_pool_setting("200");
    EXPECT_EQ(grown_prefill_quantum(explicit_whole, resolve_pool_budget(explicit_whole, roomy),
                                    roomy, scratch, 4096, 2048),
              2048);
    const PoolBudget adaptive = resolve_pool_budget({}, roomy);
    ASSERT_EQ(adaptive.n_slots, roomy.n_table_records);
    EXPECT_EQ(grown_prefill_quantum({}, adaptive, roomy, scratch, 4096, 2048), 2048);
    // Memory for only part of the way: as many rows as it holds.
    PoolRequirements tight = roomy;
    const uint64_t beside = whole.bytes + tight.fixed_bytes + scratch.fixed_bytes +
                            tight.min_headroom_bytes;
    tight.measured_usable_bytes = beside + 1000 * scratch.row_bytes + 7;
    EXPECT_EQ(grown_prefill_quantum(max, whole, tight, scratch, 4096, 2048), 1000);
    // A quantum already past the resident rows stays.
    EXPECT_EQ(grown_prefill_quantum(max, whole, roomy, fn_scratch(3000), 4096, 2048), 3000);
}

}  // namespace
}  // namespace cherenkov::engine
