// `cherenkov prepare SOURCE --output DIR [--experts 4,3,2]` (alias `pack`): packs a local HF
// BF16 or MLX affine checkpoint into a store, reusing a valid existing store, and derives the
// selected Q3 / Q2 expert tables. Progress goes to stderr: a redrawn bar on a terminal, plain
// lines otherwise or when NO_COLOR is set.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "store/prepare.h"

namespace cherenkov::cli {
namespace {

using Clock = std::chrono::steady_clock;

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

class ProgressPrinter {
public:
    ProgressPrinter() {
        const char* no_color = std::getenv("NO_COLOR");
        bar_ = ::isatty(STDERR_FILENO) == 1 && (no_color == nullptr || *no_color == '\0');
    }
    ~ProgressPrinter() {
        if (bar_ && drawn_) std::fputc('\n', stderr);
    }
    ProgressPrinter(const ProgressPrinter&) = delete;
    ProgressPrinter& operator=(const ProgressPrinter&) = delete;

    void operator()(const store::PackProgress& progress) {
        const Clock::time_point now = Clock::now();
        const bool phase_changed = progress.phase != phase_;
        if (phase_changed) {
            if (bar_ && drawn_) std::fputc('\n', stderr);
            phase_ = progress.phase;
            phase_start_ = now;
            phase_bytes_ = progress.bytes_done;
        }
        const bool finished =
            progress.items_total != 0 && progress.items_done == progress.items_total;
        const auto interval =
            bar_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
        if (!phase_changed && !finished && now - last_ < interval) return;
        if (finished && progress.items_done == last_items_) return;
        last_ = now;
        last_items_ = progress.items_done;
        const double seconds = std::chrono::duration<double>(now - phase_start_).count();
        const double rate =
            seconds > 0 ? static_cast<double>(progress.bytes_done - phase_bytes_) / seconds : 0.0;
        const double remaining = static_cast<double>(
            progress.bytes_total - std::min(progress.bytes_total, progress.bytes_done));
        const double fraction = progress.bytes_total == 0
                                    ? 1.0
                                    : static_cast<double>(progress.bytes_done) /
                                          static_cast<double>(progress.bytes_total);
        char line[256];
        std::snprintf(line, sizeof line, "%-10s %5.1f%%  %s / %s  items %llu/%llu  %s/s  ETA %s",
                      phase_.c_str(), 100.0 * fraction,
                      human_bytes(static_cast<double>(progress.bytes_done)).c_str(),
                      human_bytes(static_cast<double>(progress.bytes_total)).c_str(),
                      static_cast<unsigned long long>(progress.items_done),
                      static_cast<unsigned long long>(progress.items_total),
                      human_bytes(rate).c_str(),
                      duration_text(rate > 0 ? remaining / rate : -1).c_str());
        if (bar_) {
            const int width = 24;
            const int filled = static_cast<int>(fraction * width);
            std::string bar(static_cast<size_t>(filled), '#');
            bar.append(static_cast<size_t>(width - filled), '-');
            std::fprintf(stderr, "\r[%s] %s\x1b[K", bar.c_str(), line);
            drawn_ = true;
        } else {
            std::fprintf(stderr, "prepare: %s\n", line);
        }
        std::fflush(stderr);
    }

private:
    bool bar_ = false;
    bool drawn_ = false;
    std::string phase_;
    Clock::time_point phase_start_{};
    Clock::time_point last_{};
    uint64_t phase_bytes_ = 0;
    uint64_t last_items_ = ~uint64_t{0};
};

struct PrepareArgs {
    std::string source;
    std::string output;
    std::vector<std::string> experts;
    unsigned threads = 0;
};

}  // namespace

Command register_prepare(CLI::App& parent) {
    auto args = std::make_shared<PrepareArgs>();
    CLI::App* app =
        parent.add_subcommand("prepare", "Pack a local checkpoint into a Cherenkov store");
    app->alias("pack");
    app->add_option("source", args->source, "Checkpoint directory (HF BF16 or MLX affine)")
        ->required();
    app->add_option("--output,-o", args->output, "Store directory to create (or reuse)")
        ->required();
    app->add_option("--experts", args->experts,
                    "Expert widths: 4, 3, 2 (commas, spaces or repeated)")
        ->allow_extra_args(false)
        ->take_all();
    app->add_option("--threads", args->threads, "Quantization threads (default: all cores)");
    Command command;
    command.app = app;
    command.run = [args] {
        store::PrepareOptions options;
        options.source_dir = args->source;
        options.output_dir = args->output;
        options.expert_bits = store::parse_expert_bits(args->experts);
        options.n_threads = args->threads;
        ProgressPrinter printer;
        options.progress = [&printer](const store::PackProgress& progress) { printer(progress); };
        const store::PrepareResult result = store::prepare_store(options);
        std::string summary = result.base_packed ? "packed " : "reused ";
        summary += args->output;
        for (int width : result.derived)
            summary += ", derived " + store::lowbit_experts_name(width);
        for (int width : result.reused) summary += ", reused " + store::lowbit_experts_name(width);
        std::printf("%s\n", summary.c_str());
        return 0;
    };
    return command;
}

}  // namespace cherenkov::cli
