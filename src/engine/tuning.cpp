// The `key=value` parser of engine::Tuning (tuning.h): one table names every key once, for the
// parser, the inverse and the list in error messages.
#include "engine/tuning.h"

#include <array>
#include <charconv>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

struct BoolKey {
    std::string_view key;
    bool Tuning::*field;
};

// A whole-number key: its value is one of [min, max] (`unit` names it in messages).
struct IntKey {
    std::string_view key;
    int64_t Tuning::*field;
    int64_t min;
    int64_t max;
    std::string_view unit;
};

constexpr std::array kBoolKeys{
    BoolKey{"cuda_graphs", &Tuning::cuda_graphs},
    BoolKey{"step_graphs", &Tuning::step_graphs},
    BoolKey{"device_routing", &Tuning::device_routing},
    BoolKey{"side_streams", &Tuning::side_streams},
    BoolKey{"launch_overlap", &Tuning::launch_overlap},
    BoolKey{"gemm_mma", &Tuning::gemm_mma},
    BoolKey{"gemv_mma", &Tuning::gemv_mma},
    BoolKey{"gemv_bulk", &Tuning::gemv_bulk},
    BoolKey{"gemv_slices", &Tuning::gemv_slices},
    BoolKey{"expert_layer", &Tuning::expert_layer},
    BoolKey{"nt_fill", &Tuning::nt_fill},
    BoolKey{"cpu_avx512", &Tuning::cpu_avx512},
};

constexpr std::array kIntKeys{
    // 1 GiB: far above any record.
    IntKey{"io_piece_kib", &Tuning::io_piece_kib, 0, int64_t{1} << 20, "KiB"},
    IntKey{"next_layer_copies", &Tuning::next_layer_copies, 0, 64, "experts"},
};

constexpr std::array<std::string_view, kBoolKeys.size() + kIntKeys.size()> all_keys() {
    std::array<std::string_view, kBoolKeys.size() + kIntKeys.size()> keys{};
    for (size_t i = 0; i < kBoolKeys.size(); ++i) keys[i] = kBoolKeys[i].key;
    for (size_t i = 0; i < kIntKeys.size(); ++i) keys[kBoolKeys.size() + i] = kIntKeys[i].key;
    return keys;
}

constexpr std::array kAllKeys = all_keys();

std::string key_list() {
    std::string out;
    for (const std::string_view key : kAllKeys) {
        if (!out.empty()) out += ", ";
        out += key;
    }
    return out;
}

[[noreturn]] void reject(std::string_view setting, const std::string& why) {
    throw_invalid("--tuning '" + std::string(setting) + "': " + why);
}

bool parse_bool(std::string_view setting, std::string_view key, std::string_view value) {
    if (value == "on" || value == "true" || value == "1") return true;
    if (value == "off" || value == "false" || value == "0") return false;
    reject(setting, "key '" + std::string(key) + "' takes on/off, true/false or 1/0, not '" +
                        std::string(value) + "'");
}

int64_t parse_int(std::string_view setting, const IntKey& entry, std::string_view value) {
    int64_t number = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, number);
    if (value.empty() || ec != std::errc{} || ptr != end || number < entry.min ||
        number > entry.max) {
        reject(setting, "key '" + std::string(entry.key) + "' takes a whole number of " +
                            std::string(entry.unit) + ", " + std::to_string(entry.min) + "-" +
                            std::to_string(entry.max) + ", not '" + std::string(value) + "'");
    }
    return number;
}

}  // namespace

void apply_tuning(Tuning& tuning, std::string_view setting) {
    const size_t eq = setting.find('=');
    if (eq == std::string_view::npos) {
        reject(setting, "expected key=value (keys: " + key_list() + ")");
    }
    const std::string_view key = setting.substr(0, eq);
    const std::string_view value = setting.substr(eq + 1);
    for (const BoolKey& entry : kBoolKeys) {
        if (entry.key == key) {
            tuning.*entry.field = parse_bool(setting, key, value);
            return;
        }
    }
    for (const IntKey& entry : kIntKeys) {
        if (entry.key == key) {
            tuning.*entry.field = parse_int(setting, entry, value);
            return;
        }
    }
    reject(setting, "unknown key '" + std::string(key) + "' (keys: " + key_list() + ")");
}

Tuning parse_tuning(std::span<const std::string> settings) {
    Tuning tuning;
    for (const std::string& setting : settings) apply_tuning(tuning, setting);
    return tuning;
}

std::vector<std::string> tuning_settings(const Tuning& tuning) {
    const Tuning defaults;
    std::vector<std::string> out;
    for (const BoolKey& entry : kBoolKeys) {
        if (tuning.*entry.field == defaults.*entry.field) continue;
        out.push_back(std::string(entry.key) + (tuning.*entry.field ? "=on" : "=off"));
    }
    for (const IntKey& entry : kIntKeys) {
        if (tuning.*entry.field == defaults.*entry.field) continue;
        out.push_back(std::string(entry.key) + "=" + std::to_string(tuning.*entry.field));
    }
    return out;
}

std::span<const std::string_view> tuning_keys() {
    return kAllKeys;
}

}  // namespace cherenkov::engine
