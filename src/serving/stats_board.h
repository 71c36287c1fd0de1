// The latest engine observation, shared between the engine thread (which takes it:
// LoadedModel::observe) and the readers (control socket, /metrics), so readers never touch the
// model or wait for the GPU (docs/style.md 2.6). Empty until the first observation after load.
#pragma once

#include <memory>
#include <mutex>

#include "engine/runtime/engine_stats.h"

namespace cherenkov::serving {

class StatsBoard {
public:
    void publish(engine::EngineStats stats) {
        auto next = std::make_shared<const engine::EngineStats>(std::move(stats));
        std::lock_guard lock(mutex_);
        latest_ = std::move(next);
    }
    // Null before the first observation. Shared with every reader still holding an older one.
    std::shared_ptr<const engine::EngineStats> latest() const {
        std::lock_guard lock(mutex_);
        return latest_;
    }

private:
    mutable std::mutex mutex_;  // guards latest_ (the pointer, not the value)
    std::shared_ptr<const engine::EngineStats> latest_;
};

}  // namespace cherenkov::serving
