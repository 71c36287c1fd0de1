#include "engine/cuda/gpu_stage_timeline.h"

#include <cmath>

namespace cherenkov::engine::cuda {

std::optional<WindowTimes> measure_window(std::span<const StageMark> marks,
                                          std::span<const float> gaps_ms) {
    if (marks.size() < 2 || gaps_ms.size() + 1 != marks.size() ||
        marks.front() != StageMark::Begin || marks.back() != StageMark::End) {
        return std::nullopt;
    }
    WindowTimes times;
    bool in_stage = false;
    for (size_t i = 0; i + 1 < marks.size(); ++i) {
        switch (marks[i]) {
            case StageMark::Begin:
                if (i != 0) return std::nullopt;
                in_stage = true;
                break;
            case StageMark::Pause:
                if (!in_stage) return std::nullopt;
                in_stage = false;
                break;
            case StageMark::Resume:
                if (in_stage) return std::nullopt;
                in_stage = true;
                break;
            case StageMark::End: return std::nullopt;  // only last
        }
        const float ms = gaps_ms[i];
        if (!std::isfinite(ms) || ms < 0.0F) return std::nullopt;
        const double seconds = static_cast<double>(ms) * 1e-3;
        times.timeline_seconds += seconds;
        if (in_stage) times.stage_seconds += seconds;
    }
    return times;
}

}  // namespace cherenkov::engine::cuda
