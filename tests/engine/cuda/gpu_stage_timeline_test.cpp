// The arithmetic of a GPU timing window (engine/cuda/gpu_stage_timeline.h): plain host code,
// tested on every build.
#include "engine/cuda/gpu_stage_timeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace cherenkov::engine::cuda {
namespace {

using M = StageMark;

TEST(GpuStageTimeline, TimeAfterAPauseIsAGapAndEverythingElseAStage) {
    const std::vector<M> marks{M::Begin, M::Pause, M::Resume, M::Pause, M::Resume, M::End};
    const std::vector<float> ms{2.0F, 0.5F, 1.0F, 0.25F, 3.0F};
    const auto times = measure_window(marks, ms);
    ASSERT_TRUE(times.has_value());
    EXPECT_DOUBLE_EQ(times->timeline_seconds, 6.75e-3);
    EXPECT_DOUBLE_EQ(times->stage_seconds, 6.0e-3);
}

TEST(GpuStageTimeline, AWindowWithoutPausesIsOneStage) {
    const std::vector<M> marks{M::Begin, M::End};
    const auto times = measure_window(marks, std::vector<float>{1.5F});
    ASSERT_TRUE(times.has_value());
    EXPECT_EQ(times->stage_seconds, times->timeline_seconds);
}

TEST(GpuStageTimeline, EndingWhilePausedCountsTheTailAsAGap) {
    const std::vector<M> marks{M::Begin, M::Pause, M::End};
    const auto times = measure_window(marks, std::vector<float>{1.0F, 1.0F});
    ASSERT_TRUE(times.has_value());
    EXPECT_DOUBLE_EQ(times->stage_seconds, 1e-3);
    EXPECT_DOUBLE_EQ(times->timeline_seconds, 2e-3);
}

TEST(GpuStageTimeline, MalformedWindowsAreRejected) {
    const std::vector<float> one{1.0F};
    const std::vector<float> two{1.0F, 1.0F};
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin}, std::vector<float>{}));
    EXPECT_FALSE(measure_window(std::vector<M>{M::Pause, M::End}, one));    // no Begin
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::Pause}, one));  // no End
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::End}, two));    // sizes differ
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::Resume, M::End}, two));
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::Begin, M::End}, two));
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::End, M::End}, two));
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::End}, std::vector<float>{-1.0F}));
    EXPECT_FALSE(measure_window(std::vector<M>{M::Begin, M::End},
                                std::vector<float>{std::numeric_limits<float>::quiet_NaN()}));
}

}  // namespace
}  // namespace cherenkov::engine::cuda
