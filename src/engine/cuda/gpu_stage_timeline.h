// The arithmetic of one measured call's GPU timeline (gpu_stage_timer.cuh records it): the call
// is a sequence of marks recorded on the engine stream, and the time between two marks belongs to
// the stage that the first one opened (Begin, Resume) or to a handoff gap (after Pause: the host
// was about to block, so the GPU ran dry until the Resume the host queued after it woke).
// Plain C++, tested on every build.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace cherenkov::engine::cuda {

enum class StageMark : uint8_t {
    Begin,   // the call's first mark: a stage opens
    Pause,   // the host is about to wait: the stage closes, a gap opens
    Resume,  // the host queues work again: a stage opens
    End,     // the call's last mark
};

struct WindowTimes {
    double timeline_seconds = 0.0;
    double stage_seconds = 0.0;
};

// `marks` in recording order and `gaps_ms[i]`, the elapsed milliseconds from mark i to mark i+1
// (cudaEventElapsedTime). Returns nothing for a malformed window: fewer than two marks, not
// Begin … End, a Resume without a Pause before it, a negative or non-finite interval.
std::optional<WindowTimes> measure_window(std::span<const StageMark> marks,
                                          std::span<const float> gaps_ms);

}  // namespace cherenkov::engine::cuda
