// Where the host's time goes in decode calls of layers routed on the host (seed "Phase timing":
// observation delay, preparation before resident release, time after release), so that a slow
// RAM-tier or streaming decode says what it waits for. Host intervals from steady_clock, summed
// over layer calls; the GPU runs under all of them (its queued work overlaps the host's), so a
// phase is what the engine thread spent, not what a kernel took. Layers routed on the device and
// calls of more rows than a decode (prefill) are not timed. Plain C++: no CUDA types.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace cherenkov::engine::cuda {

struct DecodePhases {
    using Clock = std::chrono::steady_clock;

    uint64_t layers = 0;  // layer calls timed
    // From the layer's first launch until its routing is read back: the GPU's work up to the
    // router (mixers, attention or Gated DeltaNet) and the read-back.
    double routing_wait_seconds = 0.0;
    // Union of the rows' experts, lookahead, the shared expert and the resident experts queued.
    double prepare_seconds = 0.0;
    // Blocked on the host source for missing records (reads not landed yet).
    double read_wait_seconds = 0.0;
    // Queuing the copies and kernels of delivered misses.
    double miss_queue_seconds = 0.0;
    // Computing the misses dealt to the CPU (--cpu-experts), while the device copies the others.
    double cpu_experts_seconds = 0.0;
    // Waiting for the host → device copies of the misses, before their host records are let go.
    double copy_wait_seconds = 0.0;
    // The combine and the layer's remaining host work.
    double finish_seconds = 0.0;

    Clock::time_point layer_start{};  // set when a timed layer's first launch is queued

    nlohmann::json to_json() const {
        const double us_per_layer_scale = layers > 0 ? 1e6 / static_cast<double>(layers) : 0.0;
        nlohmann::json phases = {{"layers", layers}};
        nlohmann::json seconds;
        nlohmann::json us_per_layer;
        for (const auto& [name, value] :
             {std::pair{"routing_wait", routing_wait_seconds},
              std::pair{"prepare", prepare_seconds}, std::pair{"read_wait", read_wait_seconds},
              std::pair{"miss_queue", miss_queue_seconds},
              std::pair{"cpu_experts", cpu_experts_seconds},
              std::pair{"copy_wait", copy_wait_seconds}, std::pair{"finish", finish_seconds}}) {
            seconds[name] = value;
            us_per_layer[name] = value * us_per_layer_scale;
        }
        phases["seconds"] = std::move(seconds);
        phases["us_per_layer"] = std::move(us_per_layer);
        return phases;
    }
};

// Laps of one layer call into a DecodePhases (null: times nothing). The first lap starts at the
// layer's start; each lap adds the time since the previous one to a phase.
class DecodePhaseTimer {
public:
    explicit DecodePhaseTimer(DecodePhases* totals) : totals_(totals) {
        if (totals_ == nullptr) return;
        ++totals_->layers;
        last_ = totals_->layer_start;
    }

    void lap(double DecodePhases::*phase) {
        if (totals_ == nullptr) return;
        const DecodePhases::Clock::time_point now = DecodePhases::Clock::now();
        totals_->*phase += std::chrono::duration<double>(now - last_).count();
        last_ = now;
    }

private:
    DecodePhases* totals_;
    DecodePhases::Clock::time_point last_{};
};

}  // namespace cherenkov::engine::cuda
