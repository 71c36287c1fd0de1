#include "engine/cuda/cpu_experts.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "base/error.h"
#include "engine/model/expert_swiglu.h"

namespace cherenkov::engine::cuda {

std::optional<CpuExpertsSetting> CpuExpertsSetting::try_parse(std::string_view text) {
    if (text == "off") return CpuExpertsSetting{Mode::Off, 0.0};
    if (text == "auto") return CpuExpertsSetting{Mode::Auto, 0.0};
    double share = 0.0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), share);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(share) ||
        share < 0.0 || share > 1.0) {
        return std::nullopt;
    }
    return CpuExpertsSetting{Mode::Share, share};
}

CpuExpertsSetting CpuExpertsSetting::parse(std::string_view text, std::string_view what) {
    const std::optional<CpuExpertsSetting> setting = try_parse(text);
    if (!setting) {
        throw_invalid(std::string(what) + ": '" + std::string(text) + "' is not " + kExpected);
    }
    return *setting;
}

std::string CpuExpertsSetting::name() const {
    switch (mode) {
        case Mode::Off: return "off";
        case Mode::Auto: return "auto";
        case Mode::Share: break;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%g", share);
    return text;
}

CpuExperts::CpuExperts(CpuExpertsSetting setting, ThreadPool* pool, ActivationPrecision activations)
    : setting_(setting), pool_(pool), activations_(activations) {}

void CpuExperts::set_copy_seconds(double seconds) {
    // A copy too short for the clock still says the device side is cheap.
    copy_seconds_ = std::max(seconds, 1e-9);
}

double CpuExperts::cpu_cost() const {
    if (setting_.mode == CpuExpertsSetting::Mode::Share) return 1.0 - setting_.share;
    return cpu_seconds_;
}

double CpuExperts::device_cost() const {
    if (setting_.mode == CpuExpertsSetting::Mode::Share) return setting_.share;
    return copy_seconds_;
}

bool CpuExperts::takes_next(int64_t on_cpu, int64_t on_device) const {
    if (!enabled()) return false;
    // auto: the first miss is copied (and timed), the next computed (and timed); the costs then
    // decide.
    if (needs_copy_seconds()) return false;
    if (setting_.mode == CpuExpertsSetting::Mode::Auto &&
        (cpu_seconds_ <= 0.0 || (on_cpu == 0 && calls_without_cpu_ >= kReprobeCalls))) {
        return true;
    }
    const double cpu = cpu_cost();
    const double device = device_cost();
    return static_cast<double>(on_cpu + 1) * cpu <= static_cast<double>(on_device + 1) * device;
}

void CpuExperts::end_call(int64_t on_cpu, int64_t on_device) {
    figures_.copied += static_cast<uint64_t>(on_device);
    if (on_cpu > 0) {
        calls_without_cpu_ = 0;
    } else if (on_device > 0) {
        ++calls_without_cpu_;
    }
}

void CpuExperts::compute(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
                         std::span<float* const> ys) {
    if (experts.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    experts_swiglu(experts, x, n_rows, ys, pool_, activations_);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A running average over about the last sixteen calls: the machine's load moves it. Calls of
    // more experts cost less each (two pool operations for all), so the split adapts to that too.
    // A re-probe after a long time without CPU experts starts the average afresh.
    const double each = seconds / static_cast<double>(experts.size());
    const bool fresh = cpu_seconds_ <= 0.0 || calls_without_cpu_ >= kReprobeCalls;
    cpu_seconds_ = fresh ? each : cpu_seconds_ + (each - cpu_seconds_) / 16.0;
    figures_.computed += experts.size();
    figures_.seconds += seconds;
}

void CpuExperts::start(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
                       std::span<float* const> ys) {
    CHERENKOV_ASSERT(!in_flight_, "one CPU experts job at a time");
    if (experts.empty()) return;
    if (!helper_.joinable()) {
        helper_ = std::jthread([this](const std::stop_token& stop) { helper_loop(stop); });
    }
    job_ = Job{experts, x, n_rows, ys};
    failure_ = nullptr;
    in_flight_ = true;
    state_.store(kPosted, std::memory_order_release);
    state_.notify_one();
}

void CpuExperts::wait() {
    if (!in_flight_) return;
    // The job takes tens to hundreds of µs: spin briefly (the engine thread has just queued the
    // device's work), then sleep.
    for (int spin = 0; spin < 4096 && state_.load(std::memory_order_acquire) == kPosted; ++spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    state_.wait(kPosted, std::memory_order_acquire);
    in_flight_ = false;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void CpuExperts::wait_quietly() noexcept {
    try {
        wait();
    } catch (...) {
        in_flight_ = false;
    }
}

void CpuExperts::helper_loop(const std::stop_token& stop) {
    const std::stop_callback wake(stop, [this] {
        state_.store(kStopping, std::memory_order_release);
        state_.notify_all();
    });
    for (;;) {
        state_.wait(kIdle, std::memory_order_acquire);
        if (state_.load(std::memory_order_acquire) == kStopping) return;
        try {
            compute(job_.experts, job_.x, job_.n_rows, job_.ys);
        } catch (...) {
            failure_ = std::current_exception();
        }
        // kIdle unless the destructor asked to stop meanwhile.
        uint32_t posted = kPosted;
        state_.compare_exchange_strong(posted, kIdle, std::memory_order_acq_rel);
        state_.notify_all();
    }
}

CpuExpertsFigures CpuExperts::figures() const {
    CpuExpertsFigures f = figures_;
    const double cpu = cpu_cost();
    const double device = device_cost();
    // The share of misses that balances the two sides: the CPU takes d / (c + d) of them.
    f.share = enabled() && cpu + device > 0.0 ? device / (cpu + device) : 0.0;
    return f;
}

}  // namespace cherenkov::engine::cuda
