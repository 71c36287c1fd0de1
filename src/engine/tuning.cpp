// The `key=value` parser of engine::Tuning (tuning.h): one table names every key once, for the
// parser, the inverse and the list in error messages.
#include "engine/tuning.h"

#include <array>
#include <charconv>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

constexpr int64_t kMaxIoPieceKib = int64_t{1} << 20;  // 1 GiB: far above any record

struct BoolKey {
    std::string_view key;
    bool Tuning::*field;
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
};

constexpr std::string_view kIoPieceKib = "io_piece_kib";

constexpr std::array<std::string_view, kBoolKeys.size() + 1> all_keys() {
    std::array<std::string_view, kBoolKeys.size() + 1> keys{};
    for (size_t i = 0; i < kBoolKeys.size(); ++i) keys[i] = kBoolKeys[i].key;
    keys[kBoolKeys.size()] = kIoPieceKib;
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

int64_t parse_kib(std::string_view setting, std::string_view value) {
    int64_t kib = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, kib);
    if (value.empty() || ec != std::errc{} || ptr != end || kib < 0 || kib > kMaxIoPieceKib) {
        reject(setting, "key '" + std::string(kIoPieceKib) + "' takes a whole number of KiB, 0-" +
                            std::to_string(kMaxIoPieceKib) + ", not '" + std::string(value) + "'");
    }
    return kib;
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
    if (key == kIoPieceKib) {
        tuning.io_piece_kib = parse_kib(setting, value);
        return;
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
    if (tuning.io_piece_kib != defaults.io_piece_kib) {
        out.push_back(std::string(kIoPieceKib) + "=" + std::to_string(tuning.io_piece_kib));
    }
    return out;
}

std::span<const std::string_view> tuning_keys() {
    return kAllKeys;
}

}  // namespace cherenkov::engine
