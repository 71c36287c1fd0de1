#include "engine/experts/pool_budget.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// cgroup v1 reports "no limit" as a page-rounded 2^63 - 1; anything this large is unlimited.
constexpr uint64_t kUnlimitedThreshold = uint64_t{1} << 60;
constexpr double kBytesPerGb = 1e9;

std::string trim(std::string_view text) {
    const auto begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    const auto end = text.find_last_not_of(" \t\r\n");
    return std::string(text.substr(begin, end - begin + 1));
}

// The whole file as text, or nullopt when it cannot be opened (an absent cgroup file).
std::optional<std::string> read_optional_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::optional<uint64_t> parse_u64(std::string_view text) {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// A cgroup limit file: a byte count, or "max" (v2) / a huge number (v1) for no limit.
std::optional<uint64_t> read_cgroup_limit(const std::string& path) {
    const std::optional<std::string> text = read_optional_file(path);
    if (!text) return std::nullopt;
    const std::string value = trim(*text);
    if (value == "max") return std::nullopt;
    const std::optional<uint64_t> bytes = parse_u64(value);
    if (!bytes) throw_corrupt(path + ": expected a byte count or 'max', found '" + value + "'");
    if (*bytes >= kUnlimitedThreshold) return std::nullopt;
    return bytes;
}

uint64_t read_cgroup_usage(const std::string& path) {
    const std::optional<std::string> text = read_optional_file(path);
    if (!text) return 0;
    const std::string value = trim(*text);
    const std::optional<uint64_t> bytes = parse_u64(value);
    if (!bytes) throw_corrupt(path + ": expected a byte count, found '" + value + "'");
    return *bytes;
}

uint64_t read_mem_available(const std::string& path) {
    const std::optional<std::string> text = read_optional_file(path);
    if (!text) throw_not_found("cannot read " + path + " (needed to size the expert pool)");
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        std::istringstream fields(line.substr(13));
        uint64_t kib = 0;
        std::string unit;
        if (fields >> kib >> unit && unit == "kB") return kib * 1024;
        std::string message = path;
        message.append(": malformed MemAvailable line '").append(line).append("'");
        throw_corrupt(message);
    }
    throw_corrupt(path + ": no MemAvailable line");
}

std::string gb_text(uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f GB", static_cast<double>(bytes) / kBytesPerGb);
    return text;
}

// Smallest `--pool-gb` value (rounded up to 1 MB) that holds `n_slots` slots.
std::string min_setting_text(uint64_t n_slots, uint64_t slot_bytes) {
    const double gb = std::ceil(static_cast<double>(n_slots * slot_bytes) / 1e6) / 1e3;
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", gb);
    return text;
}

PoolBudget make_budget(PoolMode mode, uint64_t n_slots, uint64_t slot_bytes,
                       std::string description) {
    PoolBudget budget;
    budget.mode = mode;
    budget.n_slots = n_slots;
    budget.bytes = n_slots * slot_bytes;
    budget.description = std::move(description);
    return budget;
}

// One layer-step's union, at most the whole table (a tiny table fits entirely).
uint64_t step_slots(const PoolRequirements& req) {
    return std::min(req.step_records, req.n_table_records);
}

PoolBudget resolve_explicit(const PoolSetting& setting, const PoolRequirements& req) {
    const uint64_t n_slots = std::min(setting.bytes / req.slot_bytes, req.n_table_records);
    if (setting.bytes == 0) {
        return make_budget(PoolMode::Explicit, 0, req.slot_bytes,
                           "no expert pool (--pool-gb 0): every expert is read at fetch");
    }
    if (n_slots < step_slots(req)) {
        throw_invalid("--pool-gb " + gb_text(setting.bytes) + " holds " + std::to_string(n_slots) +
                      " expert records of " + std::to_string(req.slot_bytes) +
                      " bytes, but one layer-step can select " + std::to_string(req.step_records) +
                      ": use at least --pool-gb " +
                      min_setting_text(step_slots(req), req.slot_bytes) +
                      ", 'adaptive', or 0 for no cache");
    }
    return make_budget(PoolMode::Explicit, n_slots, req.slot_bytes,
                       "explicit pool: " + std::to_string(n_slots) + " slots, " +
                           gb_text(n_slots * req.slot_bytes));
}

PoolBudget resolve_adaptive(const PoolRequirements& req, const MemorySources& sources) {
    const uint64_t usable = req.measured_usable_bytes
                                ? *req.measured_usable_bytes
                                : read_available_memory(sources).usable_bytes();
    const uint64_t outside = req.fixed_bytes + std::max(req.min_headroom_bytes, req.reserve_bytes);
    const uint64_t pool_bytes = usable > outside ? usable - outside : 0;
    uint64_t n_slots = std::min(pool_bytes / req.slot_bytes, req.n_table_records);
    std::string description =
        "adaptive pool from " + gb_text(usable) +
        (req.measured_usable_bytes ? " free device memory (" : " usable memory (") +
        gb_text(outside) + " kept outside the pool)";
    if (n_slots < step_slots(req)) {
        const uint64_t step_bytes = step_slots(req) * req.slot_bytes;
        if (usable < req.fixed_bytes + step_bytes) {
            throw Error(ErrorKind::ResourceExhausted,
                        "not enough memory for the expert pool: " + gb_text(usable) +
                            " usable, fixed buffers need " + gb_text(req.fixed_bytes) +
                            " and one layer-step's experts " + gb_text(step_bytes));
        }
        n_slots = step_slots(req);
        description += ", raised to one layer-step's union";
    }
    description += ": " + std::to_string(n_slots) + " slots, " + gb_text(n_slots * req.slot_bytes);
    return make_budget(PoolMode::Adaptive, n_slots, req.slot_bytes, std::move(description));
}

}  // namespace

uint64_t AvailableMemory::usable_bytes() const {
    if (!cgroup_limit_bytes) return mem_available_bytes;
    const uint64_t headroom =
        *cgroup_limit_bytes > cgroup_usage_bytes ? *cgroup_limit_bytes - cgroup_usage_bytes : 0;
    return std::min(mem_available_bytes, headroom);
}

AvailableMemory read_available_memory(const MemorySources& sources) {
    AvailableMemory memory;
    memory.mem_available_bytes = read_mem_available(sources.meminfo_path);
    if (read_optional_file(sources.cgroup_v2_max_path)) {
        memory.cgroup_limit_bytes = read_cgroup_limit(sources.cgroup_v2_max_path);
        memory.cgroup_usage_bytes = read_cgroup_usage(sources.cgroup_v2_current_path);
        return memory;
    }
    memory.cgroup_limit_bytes = read_cgroup_limit(sources.cgroup_v1_limit_path);
    memory.cgroup_usage_bytes = read_cgroup_usage(sources.cgroup_v1_usage_path);
    return memory;
}

PoolBudget resolve_pool_budget(const PoolSetting& setting, const PoolRequirements& requirements,
                               const MemorySources& sources) {
    if (requirements.slot_bytes == 0) throw_internal("expert pool sizing needs a slot size");
    switch (setting.mode) {
        case PoolMode::Explicit: return resolve_explicit(setting, requirements);
        case PoolMode::Max:
            return make_budget(PoolMode::Max, requirements.n_table_records, requirements.slot_bytes,
                               "max pool: every record of the table, " +
                                   gb_text(requirements.n_table_records * requirements.slot_bytes));
        case PoolMode::Adaptive: return resolve_adaptive(requirements, sources);
        case PoolMode::Mapped:
        case PoolMode::Staging: break;  // no budget to resolve: the caller builds these pools
    }
    throw_internal("resolve_pool_budget: " + pool_setting_text(setting) + " has no slot budget");
}

ChunkFit fit_prefill_chunk(const PoolSetting& setting, const PoolBudget& budget,
                           const PoolRequirements& requirements, const ChunkScratch& scratch) {
    CHERENKOV_ASSERT(requirements.measured_usable_bytes.has_value(),
                     "fitting a prefill chunk needs the measured free memory");
    CHERENKOV_ASSERT(scratch.quantum >= 1 && scratch.min_rows >= 1 && scratch.row_bytes > 0,
                     "a prefill chunk has rows and each row scratch");
    const uint64_t usable = *requirements.measured_usable_bytes;
    const uint64_t taken = budget.bytes + requirements.fixed_bytes;
    const uint64_t left = usable > taken ? usable - taken : 0;
    // The largest chunk `left` holds (0 when not even the fixed scratch fits).
    const auto rows_in = [&](uint64_t bytes) -> int64_t {
        if (bytes < scratch.fixed_bytes) return 0;
        return static_cast<int64_t>(
            std::min<uint64_t>((bytes - scratch.fixed_bytes) / scratch.row_bytes,
                               static_cast<uint64_t>(scratch.quantum)));
    };
    const uint64_t wanted = scratch.bytes(scratch.quantum);
    ChunkFit fit;
    if (wanted <= left) {
        fit.rows = scratch.quantum;
        fit.scratch_bytes = wanted;
        fit.description = "scratch for " + std::to_string(fit.rows) + "-row prefill chunks, " +
                          gb_text(fit.scratch_bytes);
        return fit;
    }
    if (setting.mode != PoolMode::Adaptive) {
        const std::string pool = setting.mode == PoolMode::Max ? "max" : gb_text(setting.bytes);
        std::string message =
            "--pool-gb " + pool + " leaves too little memory for the scratch of " +
            "--prefill-quantum " + std::to_string(scratch.quantum) + ": " + gb_text(usable) +
            " free, the pool takes " + gb_text(budget.bytes) +
            ", fixed buffers (sequence caches for the context) " +
            gb_text(requirements.fixed_bytes) + " and a " + std::to_string(scratch.quantum) +
            "-row prefill chunk's scratch " + gb_text(wanted) + "; ";
        const int64_t rows = rows_in(left);
        if (rows >= scratch.min_rows) {
            message += "use at most --prefill-quantum " + std::to_string(rows) + ", ";
        }
        const uint64_t outside = requirements.fixed_bytes + wanted;
        const uint64_t step_bytes = step_slots(requirements) * requirements.slot_bytes;
        if (usable >= outside + step_bytes) {
            // Floored to 1 MB, so the suggestion itself fits.
            const uint64_t pool_mb = (usable - outside) / 1'000'000;
            char gb[32];
            std::snprintf(gb, sizeof gb, "%.3f", static_cast<double>(pool_mb) / 1e3);
            message += "at most --pool-gb " + std::string(gb) + ", ";
        }
        message += "or --pool-gb adaptive";
        throw_invalid(message);
    }
    fit.rows = std::max(rows_in(left), std::min(scratch.min_rows, scratch.quantum));
    fit.scratch_bytes = scratch.bytes(fit.rows);
    fit.description = "scratch for " + std::to_string(fit.rows) + "-row prefill chunks (" +
                      gb_text(fit.scratch_bytes) + "; --prefill-quantum " +
                      std::to_string(scratch.quantum) + " does not fit beside one layer-step's " +
                      "pool)";
    return fit;
}

int64_t grown_prefill_quantum(const PoolSetting& setting, const PoolBudget& budget,
                              const PoolRequirements& requirements, const ChunkScratch& scratch,
                              int64_t streaming_rows, int64_t resident_rows) {
    CHERENKOV_ASSERT(requirements.measured_usable_bytes.has_value() && scratch.row_bytes > 0,
                     "growing a prefill chunk needs the measured free memory and row scratch");
    const bool streams = budget.n_slots < requirements.n_table_records;
    // An adaptive pool that streams took the memory for experts: it stays there.
    if (streams && setting.mode != PoolMode::Explicit) return scratch.quantum;
    const int64_t target = streams ? streaming_rows : resident_rows;
    if (target <= scratch.quantum) return scratch.quantum;
    const uint64_t taken = budget.bytes + requirements.fixed_bytes + scratch.fixed_bytes +
                           requirements.min_headroom_bytes;
    const uint64_t usable = *requirements.measured_usable_bytes;
    if (usable <= taken) return scratch.quantum;
    const auto fits = static_cast<int64_t>(
        std::min<uint64_t>((usable - taken) / scratch.row_bytes, static_cast<uint64_t>(target)));
    return std::max(fits, scratch.quantum);
}

}  // namespace cherenkov::engine
