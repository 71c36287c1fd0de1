// Expert cache benchmark (issue 8). On a synthetic expert table with FN record sizes (H 2560,
// I 640, Q4 g64: 2,764,800-byte records, 512 experts per layer) it measures, reading cold with
// O_DIRECT:
//   1. raw O_DIRECT bandwidth of the table file: sequential and random record reads;
//   2. the cache's achieved read bandwidth replaying a trace with a small pool and no compute,
//      as a fraction of the raw O_DIRECT bandwidth of exactly the same record reads (replayed
//      back to back right after, same thread count, into one buffer and into a pool-sized one);
//   3. the fraction of read time hidden behind simulated compute (a spin per delivered expert):
//      1 - stall(with compute) / stall(without compute), same trace and pool, cold each time;
//   4. hit rate against pool size for LRU and frequency-aware replacement, with and without
//      lookahead, on a synthetic trace over the full 48-layer table shape (and on --trace FILE).
//      These runs use a reader that completes instantly without touching the pool (pages stay
//      uncommitted), since hit rates do not depend on the disk.
// Trace files use the text format of src/engine/experts/routing_trace.h. The table is created in
// --dir (default /tmp) unless it exists with the right size, and removed at the end unless
// --keep. Tables go to stdout as Markdown; progress to stderr.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "engine/experts/expert_cache.h"
#include "engine/experts/routing_trace.h"
#include "engine/experts/trace_replay.h"
#include "store/manifest/record_layout.h"

namespace {

using cherenkov::engine::DirectIo;
using cherenkov::engine::ExpertCache;
using cherenkov::engine::ExpertCacheOptions;
using cherenkov::engine::ExpertStats;
using cherenkov::engine::ExpertTable;
using cherenkov::engine::FileRecordReader;
using cherenkov::engine::LayerCounters;
using cherenkov::engine::RecordRead;
using cherenkov::engine::RecordReader;
using cherenkov::engine::ReplacementKind;
using cherenkov::engine::ReplayOptions;
using cherenkov::engine::ReplayResult;
using cherenkov::engine::RoutingTrace;
using cherenkov::engine::SyntheticTraceOptions;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kHidden = 2560;
constexpr uint64_t kIntermediate = 640;
constexpr int64_t kExperts = 512;
constexpr int64_t kFnLayers = 48;  // FN trunk layers, for the hit-rate sweep's table shape

struct Options {
    std::string dir = "/tmp";
    int64_t layers = 0;  // 0: as many as fit under max_table_gb
    double max_table_gb = 6.0;
    bool keep = false;
    std::string trace_file;
    int64_t steps = 48;
    int64_t rows = 1;
    int64_t top_k = 10;
    int threads = 4;                                // IO threads for the hidden-time runs
    std::vector<int> thread_counts = {1, 2, 4, 8};  // for the bandwidth runs
    double pool_fraction = 0.1;                     // of the file's records, for the IO runs
    double accuracy = 0.8;                          // simulated lookahead accuracy
    std::vector<double> compute_us = {100, 300, 1000};
    double raw_gb = 2.0;  // bytes per raw bandwidth measurement
    int64_t sweep_steps = 256;
    bool sweep_only = false;
    double half_life = 0.0;  // frequency policy, in selections; 0: the cache's default
    double zipf = 0.8;       // synthetic popularity skew
    double reuse = 0.4;      // synthetic temporal locality
    std::vector<std::string> compute_modes = {"sleep", "spin"};
    uint64_t seed = 1;
};

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A read buffer set up like the cache's pool (slot_pool.cpp): an anonymous mapping advised for
// transparent huge pages and prefaulted, so raw reads pay no more page pinning than the cache.
class ReadBuffer {
public:
    explicit ReadBuffer(uint64_t n_bytes) : n_bytes_(cherenkov::store::align_up(n_bytes, 2 << 20)) {
        void* p =
            ::mmap(nullptr, n_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) cherenkov::throw_errno("cannot map a read buffer", errno);
        ::madvise(p, n_bytes_, MADV_HUGEPAGE);
        data_ = static_cast<std::byte*>(p);
        for (uint64_t offset = 0; offset < n_bytes_; offset += 4096) data_[offset] = std::byte{0};
    }
    ~ReadBuffer() { ::munmap(data_, n_bytes_); }
    ReadBuffer(const ReadBuffer&) = delete;
    ReadBuffer& operator=(const ReadBuffer&) = delete;
    std::byte* get() const { return data_; }

private:
    uint64_t n_bytes_;
    std::byte* data_ = nullptr;
};

uint64_t splitmix(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Writes (or reuses) the table file: pseudo-random bytes, so nothing compresses or dedups.
void ensure_table(const std::string& path, const cherenkov::store::ExpertLayout& layout) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) == layout.file_bytes() && !ec) {
        std::fprintf(stderr, "reusing %s\n", path.c_str());
        return;
    }
    struct statvfs fs {};
    if (::statvfs(std::filesystem::path(path).parent_path().c_str(), &fs) != 0 ||
        fs.f_bavail * fs.f_frsize < layout.file_bytes() + 2'000'000'000ULL) {
        cherenkov::throw_io("not enough free space for a " + std::to_string(layout.file_bytes()) +
                            "-byte table in " + path);
    }
    std::fprintf(stderr, "writing %s (%.2f GB)\n", path.c_str(), layout.file_bytes() / 1e9);
    cherenkov::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) cherenkov::throw_errno("cannot create " + path, errno);
    constexpr uint64_t kChunk = 32ULL << 20;
    std::vector<uint64_t> chunk(kChunk / 8);
    uint64_t state = 42;
    for (uint64_t written = 0; written < layout.file_bytes();) {
        for (uint64_t& word : chunk) word = splitmix(&state);
        const uint64_t n = std::min(kChunk, layout.file_bytes() - written);
        if (::pwrite(fd.get(), chunk.data(), n, static_cast<off_t>(written)) !=
            static_cast<ssize_t>(n)) {
            cherenkov::throw_errno("cannot write " + path, errno);
        }
        written += n;
    }
    ::fdatasync(fd.get());
    // Drop the written pages so the machine's memory is not spent on them.
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

// Raw O_DIRECT reads of whole records: sequential splits the file into one contiguous range per
// thread; random draws record indices. Returns GB/s.
double raw_bandwidth(const std::string& path, const cherenkov::store::ExpertLayout& layout,
                     int threads, bool sequential, double gb, uint64_t seed) {
    cherenkov::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    if (!fd.valid()) cherenkov::throw_errno("cannot open " + path + " with O_DIRECT", errno);
    const uint64_t n_records = layout.n_records();
    const uint64_t per_thread =
        std::max<uint64_t>(1, static_cast<uint64_t>(gb * 1e9 / layout.record_bytes) / threads);
    const auto start = Clock::now();
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads));
    for (int thread = 0; thread < threads; ++thread) {
        workers.emplace_back([&, thread] {
            ReadBuffer buffer(layout.record_bytes);
            uint64_t state = seed * 1000 + static_cast<uint64_t>(thread);
            const uint64_t first = n_records / static_cast<uint64_t>(threads) * thread;
            for (uint64_t index = 0; index < per_thread; ++index) {
                const uint64_t record =
                    sequential ? (first + index) % n_records : splitmix(&state) % n_records;
                const ssize_t n = ::pread(fd.get(), buffer.get(), layout.record_bytes,
                                          static_cast<off_t>(record * layout.record_bytes));
                if (n != static_cast<ssize_t>(layout.record_bytes)) std::abort();
            }
        });
    }
    for (std::thread& worker : workers) worker.join();
    return static_cast<double>(per_thread * threads * layout.record_bytes) / 1e9 /
           seconds_since(start);
}

uint64_t pool_slots(const cherenkov::store::ExpertLayout& layout, const Options& options) {
    return std::max<uint64_t>(static_cast<uint64_t>(options.pool_fraction * layout.n_records()),
                              static_cast<uint64_t>(options.rows * options.top_k));
}

// Wraps the file reader and logs the offset of every read, so the same reads can be replayed
// raw (without the cache) for the bandwidth ratio.
class LoggingReader final : public RecordReader {
public:
    LoggingReader(const std::string& path, DirectIo mode, std::vector<uint64_t>* log,
                  std::mutex* log_mutex)
        : inner_(path, mode), log_(log), log_mutex_(log_mutex) {}
    RecordRead read(std::span<std::byte> out, uint64_t offset) override {
        {
            std::lock_guard lock(*log_mutex_);
            log_->push_back(offset);
        }
        return inner_.read(out, offset);
    }
    uint64_t size_bytes() const override { return inner_.size_bytes(); }
    const std::string& path() const override { return inner_.path(); }
    bool direct() const override { return inner_.direct(); }

private:
    FileRecordReader inner_;
    std::vector<uint64_t>* log_;
    std::mutex* log_mutex_;
};

struct IoRun {
    ReplayResult replay;
    ExpertStats stats;
    std::vector<uint64_t> offsets;  // every read the cache issued, in start order
};

IoRun run_cache_io(const ExpertTable& table, const RoutingTrace& trace, const Options& options,
                   double accuracy, double compute_us,
                   ReplayOptions::Compute compute = ReplayOptions::Compute::Spin) {
    IoRun run;
    std::mutex log_mutex;
    ExpertCacheOptions cache_options;
    cache_options.tables[4] = table;
    cache_options.n_slots = pool_slots(table.layout, options);
    cache_options.n_io_threads = options.threads;
    cache_options.lookahead = accuracy >= 0.0;
    cache_options.direct_io = DirectIo::Auto;
    cache_options.open_reader = [&](const std::string& path, DirectIo mode) {
        return std::make_unique<LoggingReader>(path, mode, &run.offsets, &log_mutex);
    };
    ExpertCache cache(std::move(cache_options));
    if (!cache.direct_io()) cherenkov::throw_unsupported("O_DIRECT unavailable on " + table.path);
    ReplayOptions replay;
    replay.prediction_accuracy = accuracy;
    replay.compute_seconds_per_expert = compute_us * 1e-6;
    replay.compute = compute;
    replay.seed = options.seed;
    run.replay = cherenkov::engine::replay_trace(cache, trace, replay);
    cache.wait_idle();
    run.stats = cache.stats();
    return run;
}

// The same record reads, raw: `threads` workers issue back-to-back O_DIRECT preads of the logged
// offsets in order, into one reused buffer each (n_slots 1) or into a pool-sized buffer.
// Returns GB/s.
double raw_replay_bandwidth(const std::string& path, const cherenkov::store::ExpertLayout& layout,
                            const std::vector<uint64_t>& offsets, int threads, uint64_t n_slots) {
    cherenkov::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    if (!fd.valid()) cherenkov::throw_errno("cannot open " + path + " with O_DIRECT", errno);
    std::atomic<size_t> next{0};
    const auto start = Clock::now();
    // n_slots > 1: read into a buffer as large as the cache's pool, slot after slot, so the
    // destination memory is as spread out as the cache's.
    ReadBuffer pool(n_slots * layout.record_bytes);
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads));
    for (int thread = 0; thread < threads; ++thread) {
        workers.emplace_back([&] {
            ReadBuffer buffer(layout.record_bytes);
            for (size_t index = next++; index < offsets.size(); index = next++) {
                std::byte* dest = n_slots > 1 ? pool.get() + (index % n_slots) * layout.record_bytes
                                              : buffer.get();
                const ssize_t n = ::pread(fd.get(), dest, layout.record_bytes,
                                          static_cast<off_t>(offsets[index]));
                if (n != static_cast<ssize_t>(layout.record_bytes)) std::abort();
            }
        });
    }
    for (std::thread& worker : workers) worker.join();
    return static_cast<double>(offsets.size() * layout.record_bytes) / 1e9 / seconds_since(start);
}

uint64_t completed_bytes(const ExpertStats& stats) {
    const LayerCounters total = stats.total();
    return total.quant[0].demand.completed_bytes + total.quant[0].prefetch.completed_bytes;
}

// Completes every read at once without touching the slot: hit-rate runs need no disk.
class InstantReader final : public RecordReader {
public:
    explicit InstantReader(uint64_t size_bytes) : size_bytes_(size_bytes) {}
    RecordRead read(std::span<std::byte> out, uint64_t) override { return {out.size(), 0}; }
    uint64_t size_bytes() const override { return size_bytes_; }
    const std::string& path() const override { return path_; }
    bool direct() const override { return false; }

private:
    uint64_t size_bytes_;
    std::string path_ = "(instant)";
};

double hit_rate(const RoutingTrace& trace, int64_t top_k_rows, ReplacementKind kind,
                double pool_fraction, double accuracy, const Options& bench) {
    ExpertTable table;
    table.path = "(instant)";
    table.layout = cherenkov::store::make_expert_layout(kHidden, kIntermediate, 4, 64,
                                                        trace.n_layers, 0, trace.n_experts);
    ExpertCacheOptions options;
    options.tables[4] = table;
    options.n_slots =
        std::max<uint64_t>(static_cast<uint64_t>(pool_fraction * table.layout.n_records()),
                           static_cast<uint64_t>(top_k_rows));
    options.policy = kind;
    options.frequency_half_life_selections = bench.half_life;
    options.n_io_threads = 1;
    options.lookahead = accuracy >= 0.0;
    options.prefault_pool = false;  // the instant reader never writes: keep pages uncommitted
    const uint64_t size = table.layout.file_bytes();
    options.open_reader = [size](const std::string&, DirectIo) {
        return std::make_unique<InstantReader>(size);
    };
    ExpertCache cache(std::move(options));
    ReplayOptions replay;
    replay.prediction_accuracy = accuracy;
    replay.seed = bench.seed;
    // Lookahead reads land before the fetch (as with enough lead time), so the numbers do not
    // depend on thread scheduling.
    replay.after_predict = [&cache] { cache.wait_idle(); };
    cherenkov::engine::replay_trace(cache, trace, replay);
    return cache.stats().hit_rate();
}

void print_sweep(const char* title, const RoutingTrace& trace, int64_t top_k_rows,
                 const Options& options) {
    const double table_gb = static_cast<double>(trace.n_layers * trace.n_experts) * 2'764'800 / 1e9;
    std::printf("\n### Hit rate vs pool size: %s\n\n", title);
    std::printf(
        "| pool (%% of table) | pool GB | LRU | frequency | LRU + lookahead %.0f%% | "
        "frequency + lookahead %.0f%% |\n",
        options.accuracy * 100, options.accuracy * 100);
    std::printf("|---|---|---|---|---|---|\n");
    for (const double fraction : {0.02, 0.05, 0.10, 0.20, 0.35, 0.50, 0.75, 1.0}) {
        std::fprintf(stderr, "sweep %s pool %.0f%%\n", title, fraction * 100);
        std::printf(
            "| %.0f | %.1f | %.3f | %.3f | %.3f | %.3f |\n", fraction * 100, fraction * table_gb,
            hit_rate(trace, top_k_rows, ReplacementKind::Lru, fraction, -1.0, options),
            hit_rate(trace, top_k_rows, ReplacementKind::Frequency, fraction, -1.0, options),
            hit_rate(trace, top_k_rows, ReplacementKind::Lru, fraction, options.accuracy, options),
            hit_rate(trace, top_k_rows, ReplacementKind::Frequency, fraction, options.accuracy,
                     options));
        std::fflush(stdout);
    }
}

void run_sweeps(const Options& options);

void run(const Options& options) {
    if (options.sweep_only) {
        run_sweeps(options);
        return;
    }
    const uint64_t record_bytes =
        cherenkov::store::make_expert_layout(kHidden, kIntermediate, 4, 64, 1, 0, 1).record_bytes;
    int64_t layers = options.layers;
    if (layers <= 0) {
        layers = std::max<int64_t>(
            1, static_cast<int64_t>(options.max_table_gb * 1e9 / (record_bytes * kExperts)));
    }
    ExpertTable table;
    table.layout =
        cherenkov::store::make_expert_layout(kHidden, kIntermediate, 4, 64, layers, 0, kExperts);
    table.path = (std::filesystem::path(options.dir) /
                  ("expert_cache_bench_" + std::to_string(layers) + "x512.bin"))
                     .string();
    ensure_table(table.path, table.layout);

    std::printf("## Expert cache benchmark\n\n");
    std::printf(
        "Table: %lld layers x 512 experts x %llu-byte records = %.2f GB at %s; "
        "trace: %lld steps, %lld row(s), top-%lld; %d IO threads; pool %.0f%% of the "
        "file (%.2f GB).\n",
        static_cast<long long>(layers), static_cast<unsigned long long>(record_bytes),
        table.layout.file_bytes() / 1e9, table.path.c_str(), static_cast<long long>(options.steps),
        static_cast<long long>(options.rows), static_cast<long long>(options.top_k),
        options.threads, options.pool_fraction * 100,
        options.pool_fraction * table.layout.file_bytes() / 1e9);

    std::fprintf(stderr, "raw O_DIRECT bandwidth\n");
    std::printf("\n### Raw O_DIRECT bandwidth of the file (record-sized reads)\n\n");
    std::printf("| pattern | threads | GB/s |\n|---|---|---|\n");
    for (const int threads : {1, options.threads}) {
        std::printf("| sequential | %d | %.2f |\n", threads,
                    raw_bandwidth(table.path, table.layout, threads, true, options.raw_gb, 1));
    }
    std::fflush(stdout);

    SyntheticTraceOptions trace_options;
    trace_options.n_steps = options.steps;
    trace_options.n_layers = layers;
    trace_options.n_experts = kExperts;
    trace_options.top_k = options.top_k;
    trace_options.n_rows = options.rows;
    trace_options.seed = options.seed;
    trace_options.zipf_exponent = options.zipf;
    trace_options.reuse = options.reuse;
    const RoutingTrace trace = cherenkov::engine::make_synthetic_trace(trace_options);

    // Each cache run is followed by raw replays of exactly the reads it issued (same offsets,
    // same thread count, back-to-back O_DIRECT preads): the ratio is what the cache machinery
    // keeps of the disk. The replay into one reused buffer is the best case; the replay into a
    // pool-sized buffer has the cache's destination memory (on the 2-core VM this alone costs
    // ~30%). Random reads over the whole file are shown for context.
    std::printf("\n### Cache read bandwidth vs the same reads issued raw (cold, no compute)\n\n");
    std::printf(
        "| IO threads | raw random over the file GB/s | lookahead | hit rate | GB read | "
        "cache GB/s | raw replay GB/s: one buffer / pool-sized buffer | cache / raw |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    const uint64_t n_slots = pool_slots(table.layout, options);
    for (const int threads : options.thread_counts) {
        Options with_threads = options;
        with_threads.threads = threads;
        const double random_gbps =
            raw_bandwidth(table.path, table.layout, threads, false, options.raw_gb, 10 + threads);
        for (const bool lookahead : {false, true}) {
            std::fprintf(stderr, "cache bandwidth, %d threads, lookahead %d\n", threads,
                         lookahead ? 1 : 0);
            const IoRun io =
                run_cache_io(table, trace, with_threads, lookahead ? options.accuracy : -1.0, 0.0);
            const double gb = completed_bytes(io.stats) / 1e9;
            const double cache_gbps = gb / io.replay.wall_seconds;
            const double raw_one =
                raw_replay_bandwidth(table.path, table.layout, io.offsets, threads, 1);
            const double raw_pool =
                raw_replay_bandwidth(table.path, table.layout, io.offsets, threads, n_slots);
            std::printf("| %d | %.2f | %s | %.3f | %.2f | %.2f | %.2f / %.2f | %.0f%% / %.0f%% |\n",
                        threads, random_gbps, lookahead ? "on" : "off", io.stats.hit_rate(), gb,
                        cache_gbps, raw_one, raw_pool, 100 * cache_gbps / raw_one,
                        100 * cache_gbps / raw_pool);
            std::fflush(stdout);
        }
    }

    // Hidden read time: the stall of a run with compute against the stall of the same cold run
    // without compute and without lookahead (the read time the engine would wait for). Sleep
    // leaves the core free (an accelerator computes); spin occupies it (the CPU backend).
    std::printf("\n### Read time hidden behind compute (cold, %d IO threads)\n\n", options.threads);
    std::printf(
        "| compute us/expert | mode | lookahead | wall s | compute s | stall s | stall s "
        "without compute | hidden | prediction recall |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& mode : options.compute_modes) {
        const auto compute =
            mode == "spin" ? ReplayOptions::Compute::Spin : ReplayOptions::Compute::Sleep;
        for (const double compute_us : options.compute_us) {
            for (const bool lookahead : {false, true}) {
                std::fprintf(stderr, "hidden fraction, %s %.0f us, lookahead %d\n", mode.c_str(),
                             compute_us, lookahead ? 1 : 0);
                const IoRun base = run_cache_io(table, trace, options, -1.0, 0.0);
                const IoRun io =
                    run_cache_io(table, trace, options, lookahead ? options.accuracy : -1.0,
                                 compute_us, compute);
                const double read_seconds = base.replay.stall_seconds;
                std::printf("| %.0f | %s | %s | %.2f | %.2f | %.2f | %.2f | %.0f%% | %.2f |\n",
                            compute_us, mode.c_str(), lookahead ? "on" : "off",
                            io.replay.wall_seconds, io.replay.compute_seconds,
                            io.replay.stall_seconds, read_seconds,
                            100.0 * std::max(0.0, 1.0 - io.replay.stall_seconds / read_seconds),
                            io.stats.total().prediction.recall());
                std::fflush(stdout);
            }
        }
    }

    run_sweeps(options);
    if (!options.keep) std::filesystem::remove(table.path);
}

void run_sweeps(const Options& options) {
    SyntheticTraceOptions sweep_options;
    sweep_options.n_layers = kFnLayers;
    sweep_options.n_experts = kExperts;
    sweep_options.top_k = options.top_k;
    sweep_options.n_rows = options.rows;
    sweep_options.seed = options.seed;
    sweep_options.n_steps = options.sweep_steps;
    sweep_options.zipf_exponent = options.zipf;
    sweep_options.reuse = options.reuse;
    const RoutingTrace sweep_trace = cherenkov::engine::make_synthetic_trace(sweep_options);
    const std::string title = "synthetic, " + std::to_string(kFnLayers) + " layers x 512, " +
                              std::to_string(options.sweep_steps) + " steps, " +
                              std::to_string(options.rows) + " row(s), top-" +
                              std::to_string(options.top_k) + ", zipf " +
                              std::to_string(options.zipf).substr(0, 4) + ", reuse " +
                              std::to_string(options.reuse).substr(0, 4);
    print_sweep(title.c_str(), sweep_trace, options.rows * options.top_k, options);
    if (!options.trace_file.empty()) {
        std::ifstream in(options.trace_file);
        if (!in) cherenkov::throw_not_found("cannot open trace " + options.trace_file);
        const RoutingTrace recorded =
            cherenkov::engine::parse_routing_trace(in, options.trace_file);
        int64_t widest = 1;
        for (const auto& group : recorded.layer_steps) {
            int64_t chosen = 0;
            for (const auto& row : group.rows) chosen += static_cast<int64_t>(row.size());
            widest = std::max(widest, chosen);
        }
        print_sweep(options.trace_file.c_str(), recorded, widest, options);
    }
}

int bench_main(int argc, char** argv) {
    Options options;
    CLI::App app{
        "Expert cache benchmark: raw O_DIRECT vs cache bandwidth, hidden read time, hit "
        "rate vs pool size"};
    app.add_option("--dir", options.dir, "directory for the synthetic table");
    app.add_option("--layers", options.layers, "table layers (0: as many as fit --max-table-gb)");
    app.add_option("--max-table-gb", options.max_table_gb, "largest table to create");
    app.add_flag("--keep", options.keep, "keep the table file");
    app.add_option("--trace", options.trace_file, "routing trace file for the hit-rate sweep");
    app.add_option("--steps", options.steps, "steps of the synthetic trace for the IO runs");
    app.add_option("--rows", options.rows, "rows per step (token + drafts)");
    app.add_option("--top-k", options.top_k, "experts per row");
    app.add_option("--threads", options.threads, "IO threads for the hidden-time runs");
    app.add_option("--thread-counts", options.thread_counts, "IO threads for the bandwidth runs");
    app.add_option("--pool-fraction", options.pool_fraction, "pool size for the IO runs");
    app.add_option("--accuracy", options.accuracy, "simulated lookahead accuracy");
    app.add_option("--compute-us", options.compute_us, "simulated compute per expert (list)");
    app.add_option("--raw-gb", options.raw_gb, "bytes per raw bandwidth measurement");
    app.add_option("--sweep-steps", options.sweep_steps, "steps of the hit-rate sweep trace");
    app.add_option("--seed", options.seed, "trace seed");
    app.add_option("--zipf", options.zipf, "synthetic trace popularity exponent");
    app.add_option("--reuse", options.reuse, "synthetic trace reuse of the previous step");
    app.add_flag("--sweep-only", options.sweep_only, "only the hit-rate sweeps (no disk)");
    app.add_option("--half-life", options.half_life, "frequency policy half-life in selections");
    app.add_option("--compute-modes", options.compute_modes, "sleep and/or spin");
    CLI11_PARSE(app, argc, argv);
    run(options);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return bench_main(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "expert_cache_bench: %s\n", e.what());
    } catch (...) {
        std::fprintf(stderr, "expert_cache_bench: unknown exception\n");
    }
    return 1;
}
