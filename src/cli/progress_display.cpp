#include "cli/progress_display.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cherenkov::cli {
namespace {

using store::IndexEvent;

const char* const kSpinner[] = {"|", "/", "-", "\\"};

bool use_terminal() {
    if (::isatty(STDERR_FILENO) != 1) return false;
    const char* no_color = std::getenv("NO_COLOR");
    if (no_color != nullptr && *no_color != '\0') return false;
    const char* term = std::getenv("TERM");
    return term == nullptr || std::strcmp(term, "dumb") != 0;
}

std::string kind_label(IndexEvent::Kind kind) {
    switch (kind) {
        case IndexEvent::Kind::Status: return "status";
        case IndexEvent::Kind::Headers: return "headers";
        case IndexEvent::Kind::Download: return "download";
        case IndexEvent::Kind::Pack: return "pack";
    }
    return "progress";
}

}  // namespace

std::string human_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (bytes >= 1024.0 && unit < 4) {
        bytes /= 1024.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.1f %s", bytes, units[unit]);
    return text;
}

std::string duration_text(double seconds) {
    if (seconds < 0 || seconds > 1e7) return "--:--";
    const auto total = static_cast<long>(seconds);
    char text[32];
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60,
                  total % 60);
    return text;
}

ProgressDisplay::ProgressDisplay() : terminal_(use_terminal()) {
    if (!terminal_) return;
    ticker_ = std::jthread([this](const std::stop_token& stop) {
        while (!stop.stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(120));
            std::lock_guard<std::mutex> lock(mutex_);
            if (spinning_) draw_status_locked();
        }
    });
}

ProgressDisplay::~ProgressDisplay() {
    if (ticker_.joinable()) {
        ticker_.request_stop();
        ticker_.join();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    end_line_locked();
}

void ProgressDisplay::end_line_locked() {
    if (terminal_ && drawn_) std::fputc('\n', stderr);
    drawn_ = false;
    std::fflush(stderr);
}

void ProgressDisplay::draw_status_locked() {
    spinner_frame_ = (spinner_frame_ + 1) % 4;
    std::fprintf(stderr, "\r%s %s\x1b[K", kSpinner[spinner_frame_], status_.c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressDisplay::on_pack(const store::PackProgress& progress) {
    on_event(IndexEvent{IndexEvent::Kind::Pack, progress.phase, progress.items_done,
                        progress.items_total, progress.bytes_done, progress.bytes_total});
}

void ProgressDisplay::on_event(const IndexEvent& event) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (event.kind == IndexEvent::Kind::Status) {
        if (terminal_) {
            if (!spinning_) end_line_locked();
            status_ = event.message;
            spinning_ = true;
            draw_status_locked();
        } else {
            std::fprintf(stderr, "cherenkov: %s\n", event.message.c_str());
            std::fflush(stderr);
        }
        phase_.clear();
        return;
    }
    const Clock::time_point now = Clock::now();
    // A new bar per kind and message: per file for downloads, per phase for packing.
    const std::string phase = kind_label(event.kind) + ":" +
                              (event.kind == IndexEvent::Kind::Headers ? "" : event.message);
    const bool changed = phase != phase_;
    if (changed) {
        if (terminal_) end_line_locked();
        spinning_ = false;
        phase_ = phase;
        phase_start_ = now;
        phase_start_bytes_ = event.bytes_done;
    }
    const bool final = event.total != 0 && event.done == event.total;
    const auto interval =
        terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(2000);
    if (!changed && !final && now - last_draw_ < interval) return;
    last_draw_ = now;
    draw_bar_locked(event, final);
}

void ProgressDisplay::draw_bar_locked(const IndexEvent& event, bool final) {
    const double seconds = std::chrono::duration<double>(Clock::now() - phase_start_).count();
    const bool by_bytes = event.bytes_total != 0;
    const double done =
        by_bytes ? static_cast<double>(event.bytes_done) : static_cast<double>(event.done);
    const double total =
        by_bytes ? static_cast<double>(event.bytes_total) : static_cast<double>(event.total);
    const double fraction = total > 0 ? std::min(1.0, done / total) : 0.0;
    const double progressed =
        by_bytes
            ? static_cast<double>(event.bytes_done - std::min(event.bytes_done, phase_start_bytes_))
            : done;
    const double rate = seconds > 0.05 ? progressed / seconds : 0.0;
    const double eta = rate > 0 ? (total - done) / rate : -1.0;
    char line[512];
    if (by_bytes) {
        std::snprintf(line, sizeof line, "%s %s %5.1f%%  %s / %s  %s/s  ETA %s  (%llu/%llu)",
                      kind_label(event.kind).c_str(), event.message.c_str(), 100.0 * fraction,
                      human_bytes(done).c_str(), human_bytes(total).c_str(),
                      human_bytes(rate).c_str(), duration_text(eta).c_str(),
                      static_cast<unsigned long long>(event.done),
                      static_cast<unsigned long long>(event.total));
    } else {
        std::snprintf(line, sizeof line, "%s %s %llu/%llu  ETA %s", kind_label(event.kind).c_str(),
                      event.message.c_str(), static_cast<unsigned long long>(event.done),
                      static_cast<unsigned long long>(event.total), duration_text(eta).c_str());
    }
    if (terminal_) {
        const int width = 24;
        const int filled = static_cast<int>(fraction * width);
        std::string bar(static_cast<size_t>(filled), '#');
        bar.append(static_cast<size_t>(width - filled), '-');
        std::fprintf(stderr, "\r[%s] %s\x1b[K", bar.c_str(), line);
        drawn_ = true;
        if (final) end_line_locked();
    } else if (event.kind == IndexEvent::Kind::Pack) {
        // "prepare: experts  42.0% ...", the packer's plain form since before the index.
        std::fprintf(stderr, "prepare: %s\n", line + kind_label(event.kind).size() + 1);
    } else {
        std::fprintf(stderr, "cherenkov: %s\n", line);
    }
    std::fflush(stderr);
}

}  // namespace cherenkov::cli
