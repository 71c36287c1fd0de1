#include "engine/experts/expert_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/experts/expert_cache_batch.h"
#include "engine/experts/expert_io.h"
#include "engine/experts/expert_test_tables.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;
using testing::ReaderControl;
using testing::record_matches;
using testing::record_of;
using testing::test_reader_factory;
using testing::write_test_table;

constexpr int64_t kLayers = 3;
constexpr int64_t kExperts = 8;

struct Delivered {
    size_t request_index = 0;
    int32_t expert = 0;
    int bits = 0;
};

class ExpertCacheTest : public ::testing::Test {
protected:
    ExpertCacheOptions options(uint64_t n_slots) {
        ExpertCacheOptions result;
        result.tables[4] = q4_;
        result.n_slots = n_slots;
        result.n_io_threads = 2;
        result.lookahead = false;
        result.open_reader = test_reader_factory(control_);
        return result;
    }

    static std::vector<ExpertRequest> requests(std::initializer_list<int32_t> experts,
                                               float weight = 0.5F) {
        std::vector<ExpertRequest> result;
        for (const int32_t expert : experts) result.push_back(ExpertRequest{expert, weight});
        return result;
    }

    // Fetches, consumes and destroys a batch, checking every record's bytes.
    std::vector<Delivered> run(ExpertCache& cache, int64_t layer,
                               const std::vector<ExpertRequest>& wanted) {
        std::unique_ptr<ExpertBatch> batch = cache.fetch(layer, wanted);
        return drain(cache, *batch, layer, wanted);
    }

    std::vector<Delivered> drain(ExpertCache& cache, ExpertBatch& batch, int64_t layer,
                                 const std::vector<ExpertRequest>& wanted) {
        std::vector<Delivered> delivered;
        size_t index = 0;
        ExpertWeights weights;
        while (batch.next(&index, &weights)) {
            const int32_t expert = wanted[index].expert;
            const store::ExpertLayout& layout = weights.bits == 4 ? q4_.layout : q2_.layout;
            EXPECT_TRUE(record_matches(record_of(weights), layout, layer, expert, weights.bits))
                << "layer " << layer << " expert " << expert;
            EXPECT_EQ(reinterpret_cast<uintptr_t>(record_of(weights)) % 4096, 0u);
            delivered.push_back(Delivered{index, expert, weights.bits});
        }
        (void)cache;
        return delivered;
    }

    static ExpertCounters layer_counters(const ExpertCache& cache, int64_t layer) {
        return cache.stats().layers[static_cast<size_t>(layer)].experts;
    }

    TempDir dir_;
    ExpertTable q4_ = write_test_table(dir_, "experts.bin", 4, kLayers, kExperts);
    ExpertTable q2_ = write_test_table(dir_, "experts2.bin", 2, kLayers, kExperts);
    ReaderControl control_;
};

TEST_F(ExpertCacheTest, CountsHitsMissesAndEvictsLeastRecentlyUsed) {
    ExpertCache cache(options(4));
    EXPECT_EQ(run(cache, 0, requests({0, 1})).size(), 2u);
    EXPECT_EQ(run(cache, 0, requests({0, 1})).size(), 2u);
    run(cache, 0, requests({2, 3}));
    ExpertCounters counters = layer_counters(cache, 0);
    EXPECT_EQ(counters.selections, 6u);
    EXPECT_EQ(counters.hits, 2u);
    EXPECT_EQ(counters.misses, 4u);

    run(cache, 0, requests({1}));  // LRU order now: 0, 2, 3, 1
    run(cache, 0, requests({4}));  // evicts 0
    EXPECT_EQ(cache.residency(0, 0).slot, -1);
    EXPECT_TRUE(cache.residency(0, 1).resident);
    EXPECT_TRUE(cache.residency(0, 4).resident);
    run(cache, 0, requests({5}));  // evicts 2
    EXPECT_EQ(cache.residency(0, 2).slot, -1);
    EXPECT_TRUE(cache.residency(0, 3).resident);

    counters = layer_counters(cache, 0);
    EXPECT_EQ(counters.hits, 3u);
    EXPECT_EQ(counters.misses, 6u);
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[0].quant[0].demand.reads_ok, 6u);
    EXPECT_EQ(stats.layers[0].quant[0].demand.completed_bytes, 6 * q4_.layout.record_bytes);
    EXPECT_EQ(stats.experts[1].hits, 2u);  // (layer 0, expert 1)
}

// A decode-sized fetch (misses ≤ IO threads) has its records read in pieces by several threads;
// a larger one reads each record whole. Either way every record arrives intact.
TEST_F(ExpertCacheTest, FewMissesAreReadInPiecesManyWhole) {
    const ExpertTable large = write_test_table(dir_, "large.bin", 4, kLayers, kExperts, 1024);
    ASSERT_GE(large.layout.record_bytes, 2 * ExpertIo::kPieceAlignment);
    ExpertCacheOptions opts = options(kExperts);
    opts.tables.clear();
    opts.tables[4] = large;
    opts.io_piece_bytes = ExpertIo::kPieceAlignment;
    ExpertCache cache(opts);
    const auto check = [&](int64_t layer, const std::vector<ExpertRequest>& wanted) {
        std::unique_ptr<ExpertBatch> batch = cache.fetch(layer, wanted);
        size_t index = 0;
        ExpertWeights weights;
        size_t delivered = 0;
        while (batch->next(&index, &weights)) {
            EXPECT_TRUE(
                record_matches(record_of(weights), large.layout, layer, wanted[index].expert, 4));
            ++delivered;
        }
        EXPECT_EQ(delivered, wanted.size());
    };
    check(0, requests({5}));  // one miss, two threads: two pieces
    EXPECT_EQ(control_.started_offsets().size(), 2u);
    check(1, requests({0, 1, 2, 3}));  // four misses: four whole reads
    EXPECT_EQ(control_.started_offsets().size(), 6u);
    EXPECT_EQ(cache.stats().layers[0].quant[0].demand.reads_ok, 1u);
    EXPECT_EQ(cache.stats().layers[1].quant[0].demand.reads_ok, 4u);
}

TEST_F(ExpertCacheTest, SameExpertInDifferentLayersIsADifferentRecord) {
    ExpertCache cache(options(4));
    run(cache, 0, requests({3}));
    run(cache, 2, requests({3}));
    EXPECT_EQ(layer_counters(cache, 2).misses, 1u);
    EXPECT_NE(cache.residency(0, 3).slot, cache.residency(2, 3).slot);
}

TEST_F(ExpertCacheTest, PoolOfExactlyOneStepNeverEvictsTheBatchItServes) {
    ExpertCache cache(options(4));
    run(cache, 1, requests({0, 1, 2, 3}));
    run(cache, 1, requests({0}));  // LRU order: 1, 2, 3, 0
    // 1 is least recent, but pinned by this batch before any miss takes a slot.
    const std::vector<Delivered> delivered = run(cache, 1, requests({4, 1, 5, 0}));
    EXPECT_EQ(delivered.size(), 4u);
    const ExpertCounters counters = layer_counters(cache, 1);
    EXPECT_EQ(counters.hits, 1u + 2u);
    EXPECT_EQ(cache.residency(1, 2).slot, -1);
    EXPECT_EQ(cache.residency(1, 3).slot, -1);
}

TEST_F(ExpertCacheTest, PinnedSlotsAreNeverEvicted) {
    ExpertCacheOptions opts = options(4);
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    const std::vector<ExpertRequest> held = requests({0, 1, 2, 3});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, held);
    drain(cache, *batch, 0, held);
    // While the batch lives, neither a fetch nor lookahead may take its slots.
    cache.predict(1, std::vector<int32_t>{4, 5});
    cache.wait_idle();
    EXPECT_EQ(cache.residency(1, 4).slot, -1);
    EXPECT_EQ(cache.stats().layers[1].prefetches_dropped, 2u);
    try {
        cache.fetch(1, requests({6}));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::ResourceExhausted);
        EXPECT_NE(std::string(e.what()).find("full of pinned experts"), std::string::npos);
    }
    for (const int32_t expert : {0, 1, 2, 3}) EXPECT_TRUE(cache.residency(0, expert).resident);
    batch.reset();
    EXPECT_EQ(run(cache, 1, requests({4, 5, 6, 7})).size(), 4u);
}

TEST_F(ExpertCacheTest, DeliversResidentsFirstThenMissesAsTheirReadsLand) {
    ExpertCache cache(options(8));
    run(cache, 0, requests({1, 3}));
    control_.hold = true;
    const std::vector<ExpertRequest> wanted = requests({0, 1, 2, 3});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    size_t index = 0;
    ExpertWeights weights;
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 1u);
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 3u);
    control_.wait_for_waiting(2);
    control_.release(q4_.layout.record_offset(0, 2));  // expert 2 lands first
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 2u);
    EXPECT_TRUE(record_matches(record_of(weights), q4_.layout, 0, 2, 4));
    control_.release(q4_.layout.record_offset(0, 0));
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 0u);
    EXPECT_FALSE(batch->next(&index, &weights));
    EXPECT_TRUE(batch->cut_requests().empty());
}

// ready(): true while residents are left, false while the remaining misses' reads are held, true
// once one lands (next() would not wait) and at the end (nothing left).
TEST_F(ExpertCacheTest, ReadySaysWhetherNextWouldWaitForARead) {
    ExpertCache cache(options(8));
    run(cache, 0, requests({1}));
    control_.hold = true;
    const std::vector<ExpertRequest> wanted = requests({0, 1});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    size_t index = 0;
    ExpertWeights weights;
    EXPECT_TRUE(batch->ready());
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 1u);
    control_.wait_for_waiting(1);
    EXPECT_FALSE(batch->ready());
    control_.release(q4_.layout.record_offset(0, 0));
    for (int i = 0; i < 5000 && !batch->ready(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(batch->ready());
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 0u);
    EXPECT_TRUE(batch->ready());
    EXPECT_FALSE(batch->next(&index, &weights));
}

TEST_F(ExpertCacheTest, LookaheadReadsStartAfterTheNextFetchsMisses) {
    ExpertCacheOptions opts = options(16);
    opts.n_io_threads = 1;
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    control_.hold = true;
    // Routing layer 0 predicts layer 1; layer 0's misses are read first, strongest first.
    cache.predict(1, std::vector<int32_t>{5, 6, 7});
    std::unique_ptr<ExpertBatch> batch =
        cache.fetch(0, std::vector<ExpertRequest>{{1, 0.2F}, {2, 0.9F}});
    control_.release_all();
    size_t index = 0;
    ExpertWeights weights;
    while (batch->next(&index, &weights)) {
    }
    batch.reset();
    cache.wait_idle();
    const auto& layout = q4_.layout;
    EXPECT_EQ(control_.started_offsets(),
              (std::vector<uint64_t>{layout.record_offset(0, 2), layout.record_offset(0, 1),
                                     layout.record_offset(1, 5), layout.record_offset(1, 6),
                                     layout.record_offset(1, 7)}));
}

TEST_F(ExpertCacheTest, LookaheadPrefetchesAndScoresPredictions) {
    ExpertCacheOptions opts = options(16);
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    cache.predict(1, std::vector<int32_t>{1, 2, 3, 4});
    cache.wait_idle();
    for (const int32_t expert : {1, 2, 3, 4}) EXPECT_TRUE(cache.residency(1, expert).resident);
    run(cache, 1, requests({1, 2, 5}));
    const ExpertStats stats = cache.stats();
    const LayerCounters& layer = stats.layers[1];
    EXPECT_EQ(layer.experts.hits, 2u);
    EXPECT_EQ(layer.experts.misses, 1u);
    EXPECT_EQ(layer.experts.prefetches_issued, 4u);
    EXPECT_EQ(layer.experts.prefetches_used, 2u);
    EXPECT_EQ(layer.quant[0].prefetch.reads_ok, 4u);
    EXPECT_EQ(layer.quant[0].demand.reads_ok, 1u);
    EXPECT_EQ(layer.prediction.fetches, 1u);
    EXPECT_EQ(layer.prediction.predicted, 4u);
    EXPECT_EQ(layer.prediction.actual, 3u);
    EXPECT_EQ(layer.prediction.correct, 2u);
    EXPECT_DOUBLE_EQ(layer.prediction.recall(), 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(layer.prediction.precision(), 0.5);
    // The prediction is consumed: a second fetch is not scored again.
    run(cache, 1, requests({1}));
    EXPECT_EQ(cache.stats().layers[1].prediction.fetches, 1u);
}

TEST_F(ExpertCacheTest, QueuedLookaheadIsDroppedWhenItsLayerDoesNotNeedIt) {
    ExpertCacheOptions opts = options(16);
    opts.n_io_threads = 1;
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    control_.hold = true;
    const std::vector<ExpertRequest> first = requests({3});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, first);
    cache.predict(2, std::vector<int32_t>{0, 1, 2});  // a batch is live: queued at once
    control_.release(q4_.layout.record_offset(0, 3));
    drain(cache, *batch, 0, first);
    batch.reset();
    control_.wait_for_waiting(1);  // the lookahead read of 0 is reading; 1 and 2 are queued
    const std::vector<ExpertRequest> second = requests({1, 7});
    batch = cache.fetch(2, second);
    control_.release_all();
    drain(cache, *batch, 2, second);
    batch.reset();
    cache.wait_idle();
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[2].prefetches_dropped, 1u);  // expert 2
    EXPECT_EQ(cache.residency(2, 2).slot, -1);
    EXPECT_TRUE(cache.residency(2, 0).resident);  // already reading: lands as a prefetch
    EXPECT_EQ(stats.layers[2].experts.prefetches_used, 1u);
}

TEST_F(ExpertCacheTest, StalePrefetchesAreEvictedBeforeUsedExperts) {
    ExpertCacheOptions opts = options(4);
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    run(cache, 0, requests({0, 1}));
    cache.predict(1, std::vector<int32_t>{2, 3});
    cache.wait_idle();
    run(cache, 1, requests({2}));  // 3 was predicted but not needed: stale
    // Plain LRU would evict 0 (least recent); the stale prefetch of 3 goes first.
    run(cache, 0, requests({4}));
    EXPECT_TRUE(cache.residency(0, 0).resident);
    EXPECT_EQ(cache.residency(1, 3).slot, -1);
    EXPECT_TRUE(cache.residency(1, 2).resident);
}

TEST_F(ExpertCacheTest, PendingPrefetchesSurviveTheCurrentLayersMisses) {
    ExpertCacheOptions opts = options(4);
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    run(cache, 0, requests({0, 1}));
    cache.predict(1, std::vector<int32_t>{2, 3});
    cache.wait_idle();
    run(cache, 0, requests({4}));  // evicts the least recent used expert, not the prefetches
    EXPECT_EQ(cache.residency(0, 0).slot, -1);
    run(cache, 1, requests({2, 3}));
    EXPECT_EQ(layer_counters(cache, 1).hits, 2u);
}

TEST_F(ExpertCacheTest, FrequencyPolicyKeepsAPopularExpertThatLruEvicts) {
    for (const ReplacementKind kind : {ReplacementKind::Lru, ReplacementKind::Frequency}) {
        ExpertCacheOptions opts = options(3);
        opts.policy = kind;
        ExpertCache cache(std::move(opts));
        for (int repeat = 0; repeat < 3; ++repeat) run(cache, 0, requests({0}));
        for (const int32_t expert : {1, 2, 3}) run(cache, 0, requests({expert}));
        EXPECT_EQ(cache.residency(0, 0).resident, kind == ReplacementKind::Frequency)
            << replacement_kind_name(kind);
    }
}

TEST_F(ExpertCacheTest, MixedModeReadsUnpredictedMissesAtMissPrecision) {
    ExpertCacheOptions opts = options(8);
    opts.tables[2] = q2_;
    opts.miss_bits = 2;
    ExpertCache cache(std::move(opts));
    EXPECT_EQ(cache.layout().bits, 4);
    cache.predict(0, std::vector<int32_t>{3});  // recorded; lookahead reads are off here
    std::vector<Delivered> delivered = run(cache, 0, requests({3, 4}));
    ASSERT_EQ(delivered.size(), 2u);
    for (const Delivered& d : delivered) EXPECT_EQ(d.bits, d.expert == 3 ? 4 : 2);
    EXPECT_EQ(cache.residency(0, 3).bits, 4);
    EXPECT_EQ(cache.residency(0, 4).bits, 2);

    // Cached records keep their precision; hits never change it.
    delivered = run(cache, 0, requests({3, 4}));
    for (const Delivered& d : delivered) EXPECT_EQ(d.bits, d.expert == 3 ? 4 : 2);
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[0].quant[0].demand.reads_ok, 1u);  // Q4
    EXPECT_EQ(stats.layers[0].quant[2].demand.reads_ok, 1u);  // Q2
    EXPECT_EQ(stats.layers[0].quant[0].selected_experts, 2u);
    EXPECT_EQ(stats.layers[0].quant[2].selected_experts, 2u);
}

TEST_F(ExpertCacheTest, MixedModeLookaheadReadsStayAtResidentPrecision) {
    ExpertCacheOptions opts = options(8);
    opts.tables[2] = q2_;
    opts.miss_bits = 2;
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    cache.predict(0, std::vector<int32_t>{5});
    cache.wait_idle();
    const std::vector<Delivered> delivered = run(cache, 0, requests({5}));
    ASSERT_EQ(delivered.size(), 1u);
    EXPECT_EQ(delivered[0].bits, 4);
    EXPECT_EQ(cache.stats().layers[0].quant[0].prefetch.reads_ok, 1u);
}

TEST_F(ExpertCacheTest, ResidentPrecisionTwoReadsTheQ2Table) {
    ExpertCacheOptions opts = options(4);
    opts.tables.clear();
    opts.tables[2] = q2_;
    opts.resident_bits = 2;
    ExpertCache cache(std::move(opts));
    EXPECT_EQ(cache.layout().bits, 2);
    const std::vector<Delivered> delivered = run(cache, 1, requests({6}));
    ASSERT_EQ(delivered.size(), 1u);
    EXPECT_EQ(delivered[0].bits, 2);
}

TEST_F(ExpertCacheTest, RejectsInconsistentPrecisionOptions) {
    ExpertCacheOptions missing = options(4);
    missing.miss_bits = 2;  // no Q2 table given
    EXPECT_THROW(ExpertCache cache(std::move(missing)), Error);
    ExpertCacheOptions upward = options(4);
    upward.tables.clear();
    upward.tables[2] = q2_;
    upward.tables[4] = q4_;
    upward.resident_bits = 2;
    upward.miss_bits = 4;
    EXPECT_THROW(ExpertCache cache(std::move(upward)), Error);
    ExpertCacheOptions wrong_size = options(4);
    wrong_size.tables[4].layout =
        store::make_expert_layout(64, 64, 4, 64, kLayers + 1, 0, kExperts);
    try {
        ExpertCache cache(std::move(wrong_size));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(e.what()).find("experts.bin"), std::string::npos);
    }
}

TEST_F(ExpertCacheTest, RejectsBadRequests) {
    ExpertCache cache(options(4));
    EXPECT_THROW(cache.fetch(kLayers, requests({0})), Error);
    EXPECT_THROW(cache.fetch(0, requests({kExperts})), Error);
    EXPECT_THROW(cache.fetch(0, requests({1, 1})), Error);
    EXPECT_THROW(cache.predict(0, std::vector<int32_t>{-1}), Error);
    // Nothing leaked: the pool is still fully usable.
    EXPECT_EQ(run(cache, 0, requests({0, 1, 2, 3})).size(), 4u);
}

TEST_F(ExpertCacheTest, CutWeakSkipsLateWeakExpertsAndFinishesTheirReads) {
    ExpertCacheOptions opts = options(8);
    opts.cut_weak = 0.1F;
    ExpertCache cache(std::move(opts));
    control_.hold = true;
    const std::vector<ExpertRequest> wanted{{0, 0.05F}, {1, 0.6F}, {2, 0.08F}};
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    control_.wait_for_waiting(2);
    control_.release(q4_.layout.record_offset(0, 1));
    size_t index = 0;
    ExpertWeights weights;
    ASSERT_TRUE(batch->next(&index, &weights));
    EXPECT_EQ(index, 1u);
    EXPECT_FALSE(batch->next(&index, &weights));
    const std::set<size_t> cut(batch->cut_requests().begin(), batch->cut_requests().end());
    EXPECT_EQ(cut, (std::set<size_t>{0, 2}));
    batch.reset();
    control_.release_all();
    cache.wait_idle();
    // The cut reads completed in the background and filled their slots.
    EXPECT_TRUE(cache.residency(0, 0).resident);
    EXPECT_TRUE(cache.residency(0, 2).resident);
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[0].quant[0].cut_experts, 2u);
    EXPECT_EQ(stats.layers[0].quant[0].cut_batches, 1u);
    EXPECT_EQ(stats.layers[0].quant[0].eligible_weak_misses, 2u);
    EXPECT_EQ(stats.layers[0].experts.cuts, 2u);
}

TEST_F(ExpertCacheTest, CutWeakDeliversWeakExpertsThatAlreadyLanded) {
    ExpertCacheOptions opts = options(8);
    opts.cut_weak = 0.1F;
    ExpertCache cache(std::move(opts));
    run(cache, 0, requests({0}));  // resident (strong here, so it is not cut while priming)
    control_.hold = true;
    const std::vector<ExpertRequest> wanted{{0, 0.05F}, {1, 0.5F}, {2, 0.05F}};
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    control_.wait_for_waiting(2);
    control_.release(q4_.layout.record_offset(0, 2));  // the weak miss lands first
    size_t index = 0;
    ExpertWeights weights;
    std::vector<size_t> order;
    ASSERT_TRUE(batch->next(&index, &weights));  // resident 0
    order.push_back(index);
    ASSERT_TRUE(batch->next(&index, &weights));  // 2 landed
    order.push_back(index);
    control_.release(q4_.layout.record_offset(0, 1));
    ASSERT_TRUE(batch->next(&index, &weights));
    order.push_back(index);
    EXPECT_FALSE(batch->next(&index, &weights));
    EXPECT_EQ(order, (std::vector<size_t>{0, 2, 1}));
    EXPECT_TRUE(batch->cut_requests().empty());
}

TEST_F(ExpertCacheTest, ReadErrorFailsTheFetchNamingTheRecordAndReleasesTheSlot) {
    ExpertCache cache(options(4));
    const uint64_t offset = q4_.layout.record_offset(1, 3);
    control_.errors[offset] = EIO;
    const std::vector<ExpertRequest> wanted = requests({2, 3});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(1, wanted);
    try {
        drain(cache, *batch, 1, wanted);
        FAIL() << "a failed read was not reported";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Io);
        const std::string message = e.what();
        EXPECT_NE(message.find("layer 1 expert 3 (Q4)"), std::string::npos) << message;
        EXPECT_NE(message.find(q4_.path), std::string::npos) << message;
        EXPECT_NE(message.find("at byte " + std::to_string(offset)), std::string::npos) << message;
        EXPECT_NE(message.find("Input/output error"), std::string::npos) << message;
    }
    batch.reset();
    EXPECT_EQ(cache.residency(1, 3).slot, -1);
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[1].quant[0].demand.reads_failed, 1u);
    // The slot went back to the pool: all four slots are usable, and the record reads again.
    control_.errors.clear();
    EXPECT_EQ(run(cache, 1, requests({3, 4, 5, 6})).size(), 4u);
}

TEST_F(ExpertCacheTest, ShortReadFailsTheFetch) {
    ExpertCache cache(options(4));
    const uint64_t offset = q4_.layout.record_offset(0, 5);
    control_.short_reads[offset] = 100;
    const std::vector<ExpertRequest> wanted = requests({5});
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    size_t index = 0;
    ExpertWeights weights;
    try {
        batch->next(&index, &weights);
        FAIL() << "a short read was delivered";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("short read: 100 of " +
                                             std::to_string(q4_.layout.record_bytes)),
                  std::string::npos)
            << e.what();
    }
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[0].quant[0].demand.reads_failed, 1u);
    EXPECT_EQ(stats.layers[0].quant[0].demand.completed_bytes, 100u);
}

TEST_F(ExpertCacheTest, FailedLookaheadReadIsRetriedOnDemand) {
    ExpertCacheOptions opts = options(4);
    opts.lookahead = true;
    ExpertCache cache(std::move(opts));
    control_.errors[q4_.layout.record_offset(2, 1)] = EIO;
    cache.predict(2, std::vector<int32_t>{1});
    cache.wait_idle();
    EXPECT_EQ(cache.residency(2, 1).slot, -1);
    control_.errors.clear();
    EXPECT_EQ(run(cache, 2, requests({1})).size(), 1u);
    const ExpertStats stats = cache.stats();
    EXPECT_EQ(stats.layers[2].quant[0].prefetch.reads_failed, 1u);
    EXPECT_EQ(stats.layers[2].quant[0].demand.reads_ok, 1u);
}

TEST_F(ExpertCacheTest, BatchPlacementsBuildTheBlockAddressTable) {
    ExpertCache cache(options(8));
    run(cache, 0, requests({2}));
    control_.hold = true;
    // Token routes to 2 and 5, draft to 5 and 7; 2 is resident, 5 and 7 are read.
    const std::vector<RoutedExpert> routes{{2, 0.3F}, {5, 0.7F}, {5, 0.6F}, {7, 0.4F}};
    const std::vector<ExpertRequest> wanted{{2, 0.3F}, {5, 0.7F}, {7, 0.4F}};
    std::unique_ptr<ExpertBatch> batch = cache.fetch(0, wanted);
    auto& cached = dynamic_cast<ExpertCacheBatch&>(*batch);
    std::vector<ExpertResidency> by_expert(kExperts);
    for (size_t index = 0; index < wanted.size(); ++index) {
        by_expert[static_cast<size_t>(wanted[index].expert)] = cached.placement(index);
    }
    const BlockAddressTable table = build_block_address_table(0, routes, 2, by_expert);
    ASSERT_EQ(table.entries.size(), 3u);
    EXPECT_EQ(table.n_resident, 1u);
    EXPECT_EQ(table.entries[0].expert, 2);
    EXPECT_EQ(table.entries[0].slot, cache.residency(0, 2).slot);
    EXPECT_EQ(table.entries[1].expert, 5);
    EXPECT_EQ(table.entries[2].expert, 7);
    EXPECT_GE(table.entries[2].slot, 0);  // the slot its read is filling
    control_.release_all();
    drain(cache, *batch, 0, wanted);
}

TEST_F(ExpertCacheTest, StatsSnapshotSerializesToJson) {
    ExpertCache cache(options(4));
    cache.begin_step();
    run(cache, 0, requests({0, 1}));
    run(cache, 0, requests({1}));
    cache.end_step();
    const nlohmann::json json = to_json(cache.stats(), true);
    EXPECT_EQ(json["steps"], 1);
    EXPECT_EQ(json["totals"]["selections"], 3);
    EXPECT_EQ(json["totals"]["hits"], 1);
    EXPECT_EQ(json["layers"][0]["quant"][0]["bits"], 4);
    EXPECT_EQ(json["layers"][0]["quant"][0]["demand"]["reads_ok"], 2);
    EXPECT_EQ(json["experts"].size(), 2u);
    EXPECT_EQ(json["experts"][1]["expert"], 1);
    EXPECT_NEAR(json["hit_rate"].get<double>(), 1.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace cherenkov::engine
