// Routed experts the device pool misses in a decode call, computed on the CPU instead of copied
// to the device (--cpu-experts): with the experts in host RAM, a decode token's misses cost their
// records' trip over PCIe, and the CPU can multiply some of them where they lie while the copies
// of the others run. Each miss goes to one side: the device path copies the record into a pool
// slot and computes it there; the CPU path computes the SwiGLU of all of the call's CPU experts on
// its rows over the thread pool (engine/model/expert_swiglu.h), after the device's work is queued,
// and their outputs (a few KB a row) go up before the combine, which sums every expert's output
// in its usual order. The misses are dealt greedily so that both sides finish together: the next
// one goes to the side that would then finish first, by each side's time per expert. `auto`
// measures them: the copy of one record once, the CPU's time on every call (a running average);
// a fixed share s of the misses weighs them 1 − s (CPU) and s (device). Prefill calls are left to
// the device's grouped GEMMs. Plain C++, no CUDA types: cuda_model.h's options carry it.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "engine/cpu/matmul.h"
#include "engine/experts/expert_source.h"

namespace cherenkov::engine {
class ThreadPool;
}

namespace cherenkov::engine::cuda {

// --cpu-experts (experts.cpu_experts): off, auto, or the share of misses in [0, 1].
struct CpuExpertsSetting {
    enum class Mode { Off, Auto, Share };
    Mode mode = Mode::Auto;
    double share = 0.0;  // Mode::Share only

    // "off", "auto" or a number in [0, 1]; anything else throws InvalidInput naming `what`
    // (try_parse: nullopt).
    static CpuExpertsSetting parse(std::string_view text, std::string_view what);
    static std::optional<CpuExpertsSetting> try_parse(std::string_view text);
    static constexpr const char* kExpected = "off, auto or a share of the misses from 0 to 1";
    std::string name() const;  // as parse() takes it
};

// What the split has done since load (DeviceFigures' cpu_experts_* keys).
struct CpuExpertsFigures {
    uint64_t computed = 0;  // misses computed on the CPU
    uint64_t copied = 0;    // misses copied to the device while the split was on
    double seconds = 0.0;   // the CPU's time computing them
    double share = 0.0;     // the share of misses the costs give the CPU now
};

class CpuExperts {
public:
    // `pool` null: the split is off whatever the setting.
    CpuExperts(CpuExpertsSetting setting, ThreadPool* pool, ActivationPrecision activations);

    bool enabled() const {
        return setting_.mode != CpuExpertsSetting::Mode::Off && pool_ != nullptr;
    }
    const CpuExpertsSetting& setting() const { return setting_; }
    ActivationPrecision activations() const { return activations_; }

    // auto, before the device's copy time is known: the next miss should be copied with its time
    // measured (set_copy_seconds).
    bool needs_copy_seconds() const {
        return setting_.mode == CpuExpertsSetting::Mode::Auto && copy_seconds_ <= 0.0;
    }
    void set_copy_seconds(double seconds);

    // Whether the next miss of a call goes to the CPU, `on_cpu` and `on_device` of its misses
    // having been dealt already: the side that would finish first with it, ties to the CPU.
    // auto: after kReprobeCalls calls with misses and none on the CPU, its first miss goes there
    // anyway, so a cost measured on a busy machine is measured again.
    bool takes_next(int64_t on_cpu, int64_t on_device) const;
    // The end of one call's dealing: on_cpu of its misses went to the CPU, on_device were copied.
    void end_call(int64_t on_cpu, int64_t on_device);
    static constexpr int64_t kReprobeCalls = 64;

    // ys[i] [n_rows, hidden] = expert i's SwiGLU on x [n_rows, hidden], all of them in two pool
    // operations (experts_swiglu); the time per expert goes into the CPU's running cost (auto)
    // and the figures.
    void compute(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
                 std::span<float* const> ys);
    // compute() on a helper thread (the thread pool's caller while it runs), so the engine
    // thread can queue the device's side of the call meanwhile. Returns at once; the spans and
    // what they point to must stay valid until wait(). One job at a time, and nothing else may
    // use the thread pool until wait() returns.
    void start(std::span<const ExpertWeights> experts, const float* x, int64_t n_rows,
               std::span<float* const> ys);
    // Blocks until the started job (if any) is done; rethrows its exception. wait_quietly: the
    // same for unwinding paths, dropping the exception.
    void wait();
    void wait_quietly() noexcept;

    CpuExpertsFigures figures() const;

private:
    // Seconds per expert on each side; 0 while unknown.
    double cpu_cost() const;
    double device_cost() const;

    struct Job {
        std::span<const ExpertWeights> experts;
        const float* x = nullptr;
        int64_t n_rows = 0;
        std::span<float* const> ys;
    };
    void helper_loop(const std::stop_token& stop);

    CpuExpertsSetting setting_;
    ThreadPool* pool_;
    ActivationPrecision activations_;
    double copy_seconds_ = 0.0;
    double cpu_seconds_ = 0.0;       // running average of one expert's CPU time
    int64_t calls_without_cpu_ = 0;  // calls with misses in a row that gave the CPU none
    CpuExpertsFigures figures_;
    // The helper thread (started with the first job) and its handoff: `state_` goes Idle →
    // Posted (engine thread, job_ written) → Idle (helper, job done, failure_ set on error).
    enum State : uint32_t { kIdle = 0, kPosted = 1, kStopping = 2 };
    std::atomic<uint32_t> state_{kIdle};
    bool in_flight_ = false;  // engine thread: a job was started and not yet waited for
    Job job_;
    std::exception_ptr failure_;
    std::jthread helper_;  // last: joined before the fields it uses go
};

}  // namespace cherenkov::engine::cuda
