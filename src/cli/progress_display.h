// Progress on stderr for long commands (metadata resolution, header reads, downloads, packing).
// On a terminal: a spinner for status lines and a redrawn bar with bytes, rate and ETA. When
// stderr is not a terminal, NO_COLOR is set or TERM is "dumb": plain lines, throttled.
// Stdout is never touched, so --json output stays clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "store/index/index_options.h"
#include "store/packer/packer.h"

namespace cherenkov::cli {

class ProgressDisplay {
public:
    ProgressDisplay();
    ~ProgressDisplay();
    ProgressDisplay(const ProgressDisplay&) = delete;
    ProgressDisplay& operator=(const ProgressDisplay&) = delete;

    void on_event(const store::IndexEvent& event);
    void on_pack(const store::PackProgress& progress);

    // A callback for IndexOptions::events that forwards here.
    store::IndexEvents callback() {
        return [this](const store::IndexEvent& event) { on_event(event); };
    }

private:
    using Clock = std::chrono::steady_clock;

    void draw_status_locked();
    void draw_bar_locked(const store::IndexEvent& event, bool final);
    void end_line_locked();

    bool terminal_ = false;
    std::mutex mutex_;  // guards everything below and stderr writes
    bool drawn_ = false;
    bool spinning_ = false;
    size_t spinner_frame_ = 0;
    std::string status_;
    std::string phase_;  // kind (+ file or packing phase) of the current bar
    Clock::time_point phase_start_{};
    uint64_t phase_start_bytes_ = 0;
    Clock::time_point last_draw_{};
    std::jthread ticker_;  // redraws the spinner on a terminal
};

std::string human_bytes(double bytes);      // "1.5 GiB"
std::string duration_text(double seconds);  // "0:01:05", "--:--" when unknown

}  // namespace cherenkov::cli
