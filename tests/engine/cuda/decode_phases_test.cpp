// DecodePhases and its timer (engine/cuda/decode_phases.h): plain host code, tested everywhere.
#include "engine/cuda/decode_phases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace cherenkov::engine::cuda {
namespace {

TEST(DecodePhases, LapsAddTheTimeSinceTheLayerStartedPhaseByPhase) {
    DecodePhases phases;
    phases.layer_start = DecodePhases::Clock::now();
    const auto before = DecodePhases::Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
        DecodePhaseTimer timer(&phases);
        timer.lap(&DecodePhases::routing_wait_seconds);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        timer.lap(&DecodePhases::read_wait_seconds);
        timer.lap(&DecodePhases::read_wait_seconds);  // no time passes: adds about nothing
        timer.lap(&DecodePhases::finish_seconds);
    }
    const double elapsed =
        std::chrono::duration<double>(DecodePhases::Clock::now() - before).count();
    EXPECT_EQ(phases.layers, 1U);
    EXPECT_GE(phases.routing_wait_seconds, 0.002);
    EXPECT_GE(phases.read_wait_seconds, 0.003);
    EXPECT_EQ(phases.prepare_seconds, 0.0);
    // The laps tile the layer: together they are never longer than it took.
    EXPECT_LE(phases.routing_wait_seconds + phases.read_wait_seconds + phases.finish_seconds,
              elapsed + 1e-3);
}

TEST(DecodePhases, ANullTimerTimesNothing) {
    DecodePhaseTimer timer(nullptr);
    timer.lap(&DecodePhases::routing_wait_seconds);  // must not touch anything
    SUCCEED();
}

TEST(DecodePhases, JsonGivesSecondsAndMicrosecondsPerLayer) {
    DecodePhases phases;
    EXPECT_EQ(phases.to_json()["us_per_layer"]["read_wait"].get<double>(), 0.0);  // no layers
    phases.layers = 4;
    phases.read_wait_seconds = 0.002;
    phases.copy_wait_seconds = 0.001;
    const nlohmann::json json = phases.to_json();
    EXPECT_EQ(json["layers"].get<uint64_t>(), 4U);
    EXPECT_DOUBLE_EQ(json["seconds"]["read_wait"].get<double>(), 0.002);
    EXPECT_DOUBLE_EQ(json["us_per_layer"]["read_wait"].get<double>(), 500.0);
    EXPECT_DOUBLE_EQ(json["us_per_layer"]["copy_wait"].get<double>(), 250.0);
    for (const char* name :
         {"routing_wait", "prepare", "read_wait", "miss_queue", "cpu_experts", "copy_wait",
          "finish"}) {
        EXPECT_TRUE(json["seconds"].contains(name)) << name;
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
