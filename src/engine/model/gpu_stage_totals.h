// GPU stage coverage of decode and MTP calls (seed "Phase timing"): how much of the GPU's
// timeline during those calls was covered by queued work, and how much went to handoffs (the GPU
// waiting while the host read back routing, waited for expert records, or queued the next
// kernels). A backend that records GPU timestamps fills it; the others leave `available` false.
#pragma once

#include <cstdint>
#include <string>

namespace cherenkov::engine {

struct GpuStageTotals {
    bool available = false;  // the backend records GPU timestamps
    std::string error;       // the timer's first failure (it stops timing then); empty if none
    uint64_t windows = 0;    // decode and MTP calls measured
    uint64_t invalid_windows = 0;   // calls whose timestamps could not be read or made no sense
    double timeline_seconds = 0.0;  // first to last timestamp of each measured call, summed
    double stage_seconds = 0.0;     // the parts of those timelines with queued work

    // stage_seconds / timeline_seconds; negative when nothing valid was measured.
    double stage_fraction() const {
        return timeline_seconds > 0.0 ? stage_seconds / timeline_seconds : -1.0;
    }
};

// The calls measured between two readings of one timer (`earlier` first): counts and seconds
// subtracted, availability and error as `later` has them.
inline GpuStageTotals operator-(const GpuStageTotals& later, const GpuStageTotals& earlier) {
    GpuStageTotals d = later;
    d.windows = later.windows >= earlier.windows ? later.windows - earlier.windows : 0;
    d.invalid_windows = later.invalid_windows >= earlier.invalid_windows
                            ? later.invalid_windows - earlier.invalid_windows
                            : 0;
    d.timeline_seconds = later.timeline_seconds - earlier.timeline_seconds;
    d.stage_seconds = later.stage_seconds - earlier.stage_seconds;
    return d;
}

}  // namespace cherenkov::engine
