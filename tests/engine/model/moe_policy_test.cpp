// The MoE block's host-side expert policy shared by the CPU and CUDA backends (moe_policy.h): the
// union's order, fetching in groups the source can pin with the receiver's hooks in order, early
// stops and errors still releasing each group before its batch goes, cut requests, the
// lookahead, and the per-row combine order.
#include "engine/model/moe_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace cherenkov::testing {
namespace {

using engine::ExpertBatch;
using engine::ExpertRequest;
using engine::ExpertWeights;

// Log of what a fake source and a recording receiver did, one word per event.
using Log = std::vector<std::string>;

// Delivers its requests last to first (misses complete out of order), less the cut ones; logs its
// destruction.
class FakeBatch final : public ExpertBatch {
public:
    FakeBatch(std::span<const ExpertRequest> requests, const std::set<int32_t>& cut, Log& log,
              size_t ready_first = 0)
        : log_(log), ready_first_(ready_first) {
        for (size_t i = requests.size(); i-- > 0;) {
            if (cut.count(requests[i].expert) != 0) {
                cut_.push_back(i);
            } else {
                order_.push_back(i);
            }
        }
    }
    ~FakeBatch() override { log_.push_back("batch gone"); }

    bool next(size_t* request_index, ExpertWeights* weights) override {
        if (next_ == order_.size()) return false;
        *request_index = order_[next_++];
        weights->bits = 4;
        return true;
    }
    std::span<const size_t> cut_requests() const override { return cut_; }
    // The first ready_first records are at hand; later ones (and the end) would be waited for.
    bool ready() const override { return next_ < ready_first_; }

private:
    Log& log_;
    size_t ready_first_;
    std::vector<size_t> order_;
    std::vector<size_t> cut_;
    size_t next_ = 0;
};

class FakeSource final : public engine::ExpertSource {
public:
    const store::ExpertLayout& layout() const override { return layout_; }
    std::unique_ptr<ExpertBatch> fetch(int64_t layer,
                                       std::span<const ExpertRequest> requests) override {
        std::string word = "fetch L" + std::to_string(layer);
        for (const ExpertRequest& q : requests) word += " " + std::to_string(q.expert);
        log.push_back(word);
        return std::make_unique<FakeBatch>(requests, cut, log, ready_first);
    }
    void predict(int64_t layer, std::span<const int32_t> experts) override {
        predicted_layer = layer;
        predicted.assign(experts.begin(), experts.end());
    }
    size_t max_batch_experts() const override { return group; }
    engine::ExpertSourceFigures figures() const override { return {}; }

    Log log;
    size_t group = SIZE_MAX;
    std::set<int32_t> cut;
    size_t ready_first = 0;  // records each batch has at hand (FakeBatch::ready)
    int64_t predicted_layer = -1;
    std::vector<int32_t> predicted;

private:
    store::ExpertLayout layout_;
};

// Logs every hook into the source's log; stops (or throws) at the expert named.
class RecordingReceiver final : public engine::ExpertReceiver {
public:
    explicit RecordingReceiver(Log& log) : log_(log) {}

    bool deliver(const ExpertRequest& request, const ExpertWeights& /*weights*/) override {
        if (request.expert == throw_at) throw std::runtime_error("deliver failed");
        log_.push_back("deliver " + std::to_string(request.expert));
        return request.expert != stop_at;
    }
    void begin_group() override { log_.push_back("begin"); }
    void before_wait() override { log_.push_back("wait"); }
    void after_wait() override { log_.push_back("waited"); }
    void end_group() override { log_.push_back("end"); }
    void release_group() noexcept override { log_.push_back("release"); }

    int32_t stop_at = -1;
    int32_t throw_at = -1;

private:
    Log& log_;
};

std::vector<int32_t> experts_of(const std::vector<ExpertRequest>& requests) {
    std::vector<int32_t> experts;
    for (const ExpertRequest& q : requests) experts.push_back(q.expert);
    return experts;
}

std::vector<ExpertRequest> requests_of(const std::vector<int32_t>& experts) {
    std::vector<ExpertRequest> requests;
    for (const int32_t e : experts) requests.push_back({e, 0.5F});
    return requests;
}

TEST(MoePolicy, UnionKeepsEachExpertsLargestWeightStrongestFirst) {
    // Rows [3, 1], [1, 5], [3, 7] (top 2).
    const std::vector<int32_t> experts{3, 1, 1, 5, 3, 7};
    const std::vector<float> weights{0.6F, 0.4F, 0.7F, 0.3F, 0.2F, 0.8F};
    const std::vector<ExpertRequest> requests = engine::union_of(experts, weights);
    EXPECT_EQ(experts_of(requests), (std::vector<int32_t>{7, 1, 3, 5}));
    ASSERT_EQ(requests.size(), 4U);
    EXPECT_FLOAT_EQ(requests[0].max_weight, 0.8F);
    EXPECT_FLOAT_EQ(requests[1].max_weight, 0.7F);
    EXPECT_FLOAT_EQ(requests[2].max_weight, 0.6F);
    EXPECT_FLOAT_EQ(requests[3].max_weight, 0.3F);
}

TEST(MoePolicy, UnionKeepsFirstAppearanceOrderOnExactTies) {
    const std::vector<int32_t> experts{9, 2, 4, 9, 2, 6};
    const std::vector<float> weights{0.5F, 0.25F, 0.5F, 0.5F, 0.5F, 0.25F};
    EXPECT_EQ(experts_of(engine::union_of(experts, weights)), (std::vector<int32_t>{9, 2, 4, 6}));
    EXPECT_TRUE(engine::union_of({}, {}).empty());
}

TEST(MoePolicy, FetchesInGroupsTheSourceCanPinWithHooksInOrder) {
    FakeSource source;
    source.group = 2;
    RecordingReceiver receiver(source.log);
    const std::vector<ExpertRequest> requests = requests_of({8, 3, 5});
    EXPECT_TRUE(engine::fetch_in_groups(source, 7, requests, receiver));
    EXPECT_EQ(source.log,
              (Log{"fetch L7 8 3", "begin",      "wait",  "waited",  "deliver 3", "wait",
                   "waited",       "deliver 8",  "wait",  "waited",  "end",       "release",
                   "batch gone",   "fetch L7 5", "begin", "wait",    "waited",    "deliver 5",
                   "wait",         "waited",     "end",   "release", "batch gone"}));
}

// A receiver hears the wait hooks only around the waits the batch could not say are ready: here
// after the two records at hand, before the third and before the end.
TEST(MoePolicy, BlockingWaitsAreAnnouncedOnlyWhereTheBatchHasNoRecordReady) {
    class BlockLogger final : public engine::ExpertReceiver {
    public:
        explicit BlockLogger(Log& log) : log_(log) {}
        bool deliver(const ExpertRequest& request, const ExpertWeights& /*weights*/) override {
            log_.push_back("deliver " + std::to_string(request.expert));
            return true;
        }
        void before_blocking_wait() override { log_.push_back("block"); }
        void before_wait() override { log_.push_back("wait"); }
        void after_wait() override { log_.push_back("waited"); }

    private:
        Log& log_;
    };
    FakeSource source;
    source.ready_first = 2;
    BlockLogger receiver(source.log);
    engine::fetch_in_groups(source, 0, requests_of({4, 5, 6}), receiver);
    EXPECT_EQ(source.log, (Log{"fetch L0 4 5 6", "deliver 6", "deliver 5", "block", "wait",
                               "waited", "deliver 4", "block", "wait", "waited", "batch gone"}));
}

TEST(MoePolicy, AnUnboundedSourceGetsOneFetchAndNoRequestsNone) {
    FakeSource source;
    RecordingReceiver receiver(source.log);
    EXPECT_TRUE(engine::fetch_in_groups(source, 0, requests_of({1, 2, 3, 4, 5}), receiver));
    EXPECT_EQ(source.log.front(), "fetch L0 1 2 3 4 5");
    EXPECT_EQ(std::count_if(source.log.begin(), source.log.end(),
                            [](const std::string& w) { return w.rfind("fetch", 0) == 0; }),
              1);
    source.log.clear();
    EXPECT_TRUE(engine::fetch_in_groups(source, 0, {}, receiver));
    EXPECT_TRUE(source.log.empty());
}

TEST(MoePolicy, ASourceThatReportsNoBoundStillFetchesOneAtATime) {
    FakeSource source;
    source.group = 0;  // treated as 1
    RecordingReceiver receiver(source.log);
    EXPECT_TRUE(engine::fetch_in_groups(source, 2, requests_of({4, 6}), receiver));
    EXPECT_EQ(std::count_if(source.log.begin(), source.log.end(),
                            [](const std::string& w) { return w.rfind("fetch", 0) == 0; }),
              2);
}

TEST(MoePolicy, AnEarlyStopReleasesTheGroupBeforeItsBatchAndFetchesNoMore) {
    FakeSource source;
    source.group = 2;
    RecordingReceiver receiver(source.log);
    receiver.stop_at = 3;
    EXPECT_FALSE(engine::fetch_in_groups(source, 1, requests_of({8, 3, 5}), receiver));
    EXPECT_EQ(source.log, (Log{"fetch L1 8 3", "begin", "wait", "waited", "deliver 3", "release",
                               "batch gone"}));
}

TEST(MoePolicy, AnErrorInDeliveryStillReleasesTheGroupBeforeItsBatch) {
    FakeSource source;
    RecordingReceiver receiver(source.log);
    receiver.throw_at = 5;
    EXPECT_THROW(engine::fetch_in_groups(source, 1, requests_of({5, 6}), receiver),
                 std::runtime_error);
    // Delivered last to first: 6, then 5 throws.
    EXPECT_EQ(source.log, (Log{"fetch L1 5 6", "begin", "wait", "waited", "deliver 6", "wait",
                               "waited", "release", "batch gone"}));
}

TEST(MoePolicy, RequestsTheSourceCutsAreNeverDelivered) {
    FakeSource source;
    source.group = 2;
    source.cut = {3, 9};
    RecordingReceiver receiver(source.log);
    EXPECT_TRUE(engine::fetch_in_groups(source, 4, requests_of({8, 3, 9, 5}), receiver));
    Log delivered;
    for (const std::string& word : source.log) {
        if (word.rfind("deliver", 0) == 0) delivered.push_back(word);
    }
    EXPECT_EQ(delivered, (Log{"deliver 8", "deliver 5"}));
    EXPECT_EQ(std::count(source.log.begin(), source.log.end(), "end"), 2);
}

TEST(MoePolicy, PredictionIsTheUnionStrongestFirstLessWhatNeedsNoRead) {
    FakeSource source;
    const std::vector<int32_t> experts{3, 1, 1, 5, 3, 7};
    const std::vector<float> weights{0.6F, 0.4F, 0.7F, 0.3F, 0.2F, 0.8F};
    engine::predict_next(source, 12, experts, weights);
    EXPECT_EQ(source.predicted_layer, 12);
    EXPECT_EQ(source.predicted, (std::vector<int32_t>{7, 1, 3, 5}));
    engine::predict_next(source, 13, experts, weights, [](int32_t e) { return e != 1; });
    EXPECT_EQ(source.predicted_layer, 13);
    EXPECT_EQ(source.predicted, (std::vector<int32_t>{7, 3, 5}));
}

TEST(MoePolicy, EachRowsSlotsAreSummedInIncreasingExpertIndex) {
    // Rows [5, 2, 9], [1, 8, 0] (top 3): slot indices t·3 + j.
    const std::vector<int32_t> experts{5, 2, 9, 1, 8, 0};
    EXPECT_EQ(engine::slots_in_expert_order(experts, 3), (std::vector<int64_t>{1, 0, 2, 5, 3, 4}));
    EXPECT_EQ(engine::slots_in_expert_order(experts, 1), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_TRUE(engine::slots_in_expert_order({}, 2).empty());
}

}  // namespace
}  // namespace cherenkov::testing
