// GPU stage coverage of decode and MTP calls (seed "Phase timing"; GpuStageTotals in
// engine/model/gpu_stage_totals.h). A call is a window: CUDA events recorded on the engine stream
// at its start, before every point where the host blocks (Pause: routing read-back, waiting for an
// expert record), after it queues work again (Resume), and at its end. The events are read a call
// late with cudaEventQuery, never waited for, so timing adds no host sync; a failing timer call
// stops the timing and is reported, it never fails the forward pass. Marks asked for while the
// stream is being captured into a graph are skipped (a captured event would fire at replay).
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <vector>

#include "engine/cuda/gpu_stage_timeline.h"
#include "engine/model/gpu_stage_totals.h"

namespace cherenkov::engine::cuda {

class GpuStageTimer {
public:
    explicit GpuStageTimer(cudaStream_t stream) : stream_(stream) { totals_.available = true; }
    ~GpuStageTimer();
    GpuStageTimer(const GpuStageTimer&) = delete;
    GpuStageTimer& operator=(const GpuStageTimer&) = delete;

    // Opens a window; a window still open is dropped.
    void begin_window();
    void pause() { mark(StageMark::Pause); }
    void resume() { mark(StageMark::Resume); }
    // Closes the window, then folds in the earlier windows whose events have completed.
    void end_window();

    // The totals of the windows whose events have completed; reads them without waiting.
    GpuStageTotals totals();

private:
    struct Window {
        std::vector<cudaEvent_t> events;
        std::vector<StageMark> marks;
    };

    void mark(StageMark kind);
    cudaEvent_t take_event();
    void fail(const char* what, cudaError_t status);
    void harvest();
    void recycle(Window& window);

    // Windows waiting for their events beyond which the timer stops opening new ones: decode
    // calls read their tokens back, so in practice one is pending at a time.
    static constexpr size_t kMaxPending = 16;

    cudaStream_t stream_;
    bool in_window_ = false;
    bool paused_ = false;
    Window open_;
    std::deque<Window> pending_;
    std::vector<cudaEvent_t> free_events_;
    GpuStageTotals totals_;
};

}  // namespace cherenkov::engine::cuda
