#include <string>

#include "engine/cuda/gpu_stage_timer.cuh"

namespace cherenkov::engine::cuda {

GpuStageTimer::~GpuStageTimer() {
    recycle(open_);
    for (Window& w : pending_) recycle(w);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
}

void GpuStageTimer::fail(const char* what, cudaError_t status) {
    if (totals_.error.empty())
        totals_.error = std::string(what) + ": " + cudaGetErrorString(status);
    totals_.available = false;
    in_window_ = false;
}

cudaEvent_t GpuStageTimer::take_event() {
    if (!free_events_.empty()) {
        cudaEvent_t e = free_events_.back();
        free_events_.pop_back();
        return e;
    }
    cudaEvent_t e = nullptr;
    // Default flags: timing on (cudaEventDisableTiming would make elapsed times unreadable).
    if (const cudaError_t status = cudaEventCreate(&e); status != cudaSuccess) {
        fail("cudaEventCreate", status);
        return nullptr;
    }
    return e;
}

void GpuStageTimer::recycle(Window& window) {
    free_events_.insert(free_events_.end(), window.events.begin(), window.events.end());
    window.events.clear();
    window.marks.clear();
}

void GpuStageTimer::mark(StageMark kind) {
    if (!in_window_) return;
    // Pause and Resume alternate; a repeated one adds nothing.
    if (kind == StageMark::Pause && paused_) return;
    if (kind == StageMark::Resume && !paused_) return;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &capture) != cudaSuccess ||
        capture != cudaStreamCaptureStatusNone) {
        return;
    }
    cudaEvent_t e = take_event();
    if (e == nullptr) return;
    if (const cudaError_t status = cudaEventRecord(e, stream_); status != cudaSuccess) {
        free_events_.push_back(e);
        fail("cudaEventRecord", status);
        return;
    }
    open_.events.push_back(e);
    open_.marks.push_back(kind);
    if (kind == StageMark::Pause) paused_ = true;
    if (kind == StageMark::Resume) paused_ = false;
}

void GpuStageTimer::begin_window() {
    if (!totals_.available) return;
    if (in_window_) recycle(open_);  // never ended (an exception in between): dropped
    in_window_ = false;
    if (pending_.size() >= kMaxPending) return;
    in_window_ = true;
    paused_ = false;
    mark(StageMark::Begin);
}

void GpuStageTimer::end_window() {
    if (!in_window_) return;
    paused_ = false;  // End closes whatever is open
    mark(StageMark::End);
    in_window_ = false;
    if (!totals_.available) return;
    pending_.push_back(std::move(open_));
    open_ = Window{};
    // Read the earlier windows now, while the device still runs this call's tail: at the next
    // call's start the device would wait for it (a prefill window's 600 elapsed-time reads took
    // 1.2 ms of a 25 ms call there, CUPTI trace).
    harvest();
}

void GpuStageTimer::harvest() {
    while (!pending_.empty()) {
        Window& w = pending_.front();
        const cudaError_t done = cudaEventQuery(w.events.back());
        if (done == cudaErrorNotReady) return;  // later windows were recorded after it
        if (done != cudaSuccess) {
            fail("cudaEventQuery", done);
            return;
        }
        std::vector<float> gaps_ms(w.events.size() - 1);
        bool readable = true;
        for (size_t i = 0; i + 1 < w.events.size(); ++i) {
            if (cudaEventElapsedTime(&gaps_ms[i], w.events[i], w.events[i + 1]) != cudaSuccess) {
                cudaGetLastError();  // not sticky: an unreadable pair only spoils this window
                readable = false;
                break;
            }
        }
        const std::optional<WindowTimes> times =
            readable ? measure_window(w.marks, gaps_ms) : std::nullopt;
        if (times) {
            ++totals_.windows;
            totals_.timeline_seconds += times->timeline_seconds;
            totals_.stage_seconds += times->stage_seconds;
        } else {
            ++totals_.invalid_windows;
        }
        recycle(w);
        pending_.pop_front();
    }
}

GpuStageTotals GpuStageTimer::totals() {
    if (totals_.available) harvest();
    return totals_;
}

}  // namespace cherenkov::engine::cuda
