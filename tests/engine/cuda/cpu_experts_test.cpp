// The CPU side of --cpu-experts (engine/cuda/cpu_experts.h): the setting's words, how misses are
// dealt between the CPU and the device, and the CPU's SwiGLU. Plain host code, tested everywhere;
// the CUDA model's use of it is tested in cuda_model_test.cpp.
#include "engine/cuda/cpu_experts.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/expert_swiglu.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::engine::cuda {
namespace {

using Mode = CpuExpertsSetting::Mode;

TEST(CpuExpertsSetting, ParsesOffAutoAndSharesAndNamesThemBack) {
    EXPECT_EQ(CpuExpertsSetting::parse("off", "--cpu-experts").mode, Mode::Off);
    EXPECT_EQ(CpuExpertsSetting::parse("auto", "--cpu-experts").mode, Mode::Auto);
    for (const char* text : {"0", "1", "0.25", "0.5"}) {
        const CpuExpertsSetting s = CpuExpertsSetting::parse(text, "--cpu-experts");
        EXPECT_EQ(s.mode, Mode::Share) << text;
        EXPECT_EQ(s.share, std::stod(text)) << text;
        EXPECT_EQ(s.name(), text);
    }
    EXPECT_EQ(CpuExpertsSetting::parse("auto", "x").name(), "auto");
    EXPECT_EQ(CpuExpertsSetting::parse("off", "x").name(), "off");
}

TEST(CpuExpertsSetting, RejectsAnythingElseNamingTheFlag) {
    for (const char* text : {"", "on", "1.5", "-0.1", "0.5x", "nan", "inf", " 0.5"}) {
        try {
            CpuExpertsSetting::parse(text, "--cpu-experts");
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
            EXPECT_NE(std::string(e.what()).find("--cpu-experts"), std::string::npos) << e.what();
        }
    }
}

// Deals `n` misses of one call and returns how many went to the CPU, checking that each decision
// is the one that leaves the sides most even.
int64_t deal(const CpuExperts& experts, int64_t n) {
    int64_t on_cpu = 0;
    int64_t on_device = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (experts.takes_next(on_cpu, on_device)) {
            ++on_cpu;
        } else {
            ++on_device;
        }
    }
    return on_cpu;
}

TEST(CpuExperts, AFixedShareDealsThatShareOfEachCallsMisses) {
    ThreadPool pool(1);
    const auto with = [&](const char* share) {
        return CpuExperts(CpuExpertsSetting::parse(share, "x"), &pool, ActivationPrecision::F32);
    };
    EXPECT_EQ(deal(with("0"), 10), 0);
    EXPECT_EQ(deal(with("1"), 10), 10);
    EXPECT_EQ(deal(with("0.5"), 10), 5);
    EXPECT_EQ(deal(with("0.25"), 8), 2);
    EXPECT_EQ(deal(with("0.75"), 8), 6);
    // Ties go to the CPU: one miss at an even split is computed there.
    EXPECT_EQ(deal(with("0.5"), 1), 1);
    EXPECT_DOUBLE_EQ(with("0.25").figures().share, 0.25);
}

TEST(CpuExperts, OffOrWithoutAPoolDealsNothing) {
    ThreadPool pool(1);
    CpuExperts off(CpuExpertsSetting::parse("off", "x"), &pool, ActivationPrecision::F32);
    CpuExperts no_pool(CpuExpertsSetting::parse("1", "x"), nullptr, ActivationPrecision::F32);
    EXPECT_FALSE(off.enabled());
    EXPECT_FALSE(no_pool.enabled());
    EXPECT_EQ(deal(off, 10), 0);
    EXPECT_EQ(deal(no_pool, 10), 0);
    EXPECT_EQ(off.figures().share, 0.0);
}

// Three routed experts of a fixture's store, and three rows of input.
struct FixtureExpert {
    FixtureExpert() : engine("tiny_a/hf_flat_fused") {
        const std::vector<ExpertRequest> wanted{{1, 1.0F}, {0, 0.5F}, {2, 0.25F}};
        batch = engine.experts.fetch(0, wanted);
        size_t index = 0;
        weights.resize(wanted.size());
        ExpertWeights delivered;
        while (batch->next(&index, &delivered)) weights[index] = delivered;
        hidden = weights[0].gate.cols;
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0F, 1.0F);
        x.resize(static_cast<size_t>(3 * hidden));
        for (float& v : x) v = normal(rng);
    }
    cherenkov::testing::FixtureEngine engine;
    std::unique_ptr<ExpertBatch> batch;
    std::vector<ExpertWeights> weights;
    int64_t hidden = 0;
    std::vector<float> x;
};

TEST(CpuExperts, ComputesTheMoeBlocksSwigluBitForBitAndCountsIt) {
    FixtureExpert f;
    ThreadPool pool(3);
    for (const ActivationPrecision activations :
         {ActivationPrecision::F32, ActivationPrecision::Q8}) {
        CpuExperts experts(CpuExpertsSetting::parse("auto", "x"), &pool, activations);
        // Three experts in one call, each as expert_swiglu gives it alone.
        std::vector<std::vector<float>> y(3, std::vector<float>(f.x.size()));
        float* const ys[] = {y[0].data(), y[1].data(), y[2].data()};
        experts.compute(f.weights, f.x.data(), 3, ys);
        for (size_t i = 0; i < f.weights.size(); ++i) {
            std::vector<float> expected(f.x.size());
            expert_swiglu(f.weights[i], f.x.data(), 3, expected.data(), &pool, activations);
            EXPECT_EQ(y[i], expected) << "expert " << i;
        }
        const CpuExpertsFigures figures = experts.figures();
        EXPECT_EQ(figures.computed, 3U);
        EXPECT_GT(figures.seconds, 0.0);
    }
}

// auto: the first miss is copied (its copy timed), the next computed (timed); from then on the
// measured costs deal them, the cheaper side taking more.
// start() runs the same computation on the helper thread; wait() hands back its results, and an
// error on the helper comes back from wait(). Several jobs in a row reuse the one helper.
TEST(CpuExperts, StartedJobsGiveComputesBitsAndReportTheirErrorsAtWait) {
    FixtureExpert f;
    ThreadPool pool(3);
    CpuExperts experts(CpuExpertsSetting::parse("auto", "x"), &pool, ActivationPrecision::F32);
    std::vector<std::vector<float>> expected(3, std::vector<float>(f.x.size()));
    for (size_t i = 0; i < f.weights.size(); ++i) {
        expert_swiglu(f.weights[i], f.x.data(), 3, expected[i].data(), &pool,
                      ActivationPrecision::F32);
    }
    for (int job = 0; job < 3; ++job) {
        std::vector<std::vector<float>> y(3, std::vector<float>(f.x.size()));
        float* const ys[] = {y[0].data(), y[1].data(), y[2].data()};
        experts.start(f.weights, f.x.data(), 3, ys);
        experts.wait();
        EXPECT_EQ(y, expected) << "job " << job;
    }
    EXPECT_EQ(experts.figures().computed, 9U);
    experts.wait();  // nothing in flight: returns at once

    // One output pointer null: experts_swiglu refuses it on the helper.
    std::vector<float> y0(f.x.size());
    float* const bad[] = {y0.data(), nullptr, y0.data()};
    experts.start(f.weights, f.x.data(), 3, bad);
    EXPECT_THROW(experts.wait(), Error);
    // The helper is still there for the next job.
    std::vector<std::vector<float>> y(3, std::vector<float>(f.x.size()));
    float* const ys[] = {y[0].data(), y[1].data(), y[2].data()};
    experts.start(f.weights, f.x.data(), 3, ys);
    experts.wait_quietly();
    EXPECT_EQ(y, expected);
}

TEST(CpuExperts, AutoMeasuresBothSidesBeforeBalancingThem) {
    FixtureExpert f;
    ThreadPool pool(1);
    CpuExperts experts(CpuExpertsSetting::parse("auto", "x"), &pool, ActivationPrecision::F32);
    EXPECT_TRUE(experts.needs_copy_seconds());
    EXPECT_FALSE(experts.takes_next(0, 0));
    std::vector<float> y(f.x.size());
    float* const ys[] = {y.data()};
    experts.compute(std::span(f.weights.data(), 1), f.x.data(), 1, ys);
    const double cpu = experts.figures().seconds;
    // A device 100x slower per expert than the CPU: nearly every miss goes to the CPU.
    experts.set_copy_seconds(100.0 * cpu);
    EXPECT_FALSE(experts.needs_copy_seconds());
    EXPECT_GE(deal(experts, 20), 19);
    EXPECT_NEAR(experts.figures().share, 100.0 / 101.0, 1e-9);
    // One 100x faster: the CPU takes none of a call's few misses.
    experts.set_copy_seconds(cpu / 100.0);
    EXPECT_EQ(deal(experts, 20), 0);
    // Until that has lasted kReprobeCalls calls: the next call's first miss goes to the CPU, to
    // measure it again, and no more than that one.
    for (int64_t call = 0; call < CpuExperts::kReprobeCalls; ++call) {
        EXPECT_EQ(deal(experts, 20), 0);
        experts.end_call(0, 20);
    }
    EXPECT_EQ(deal(experts, 20), 1);
    experts.end_call(1, 19);
    EXPECT_EQ(deal(experts, 20), 0);
    EXPECT_EQ(experts.figures().copied, static_cast<uint64_t>(CpuExperts::kReprobeCalls * 20 + 19));
}

}  // namespace
}  // namespace cherenkov::engine::cuda
