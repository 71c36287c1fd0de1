#include "engine/experts/pool_setting.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

constexpr double kBytesPerGb = 1e9;
constexpr double kMaxGb = 1e6;  // the configuration file's range for both settings

std::string_view trim(std::string_view text) {
    const auto begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) return {};
    const auto end = text.find_last_not_of(" \t\r\n");
    return text.substr(begin, end - begin + 1);
}

}  // namespace

PoolSetting PoolSetting::gb(double decimal_gb) {
    return PoolSetting{.mode = PoolMode::Explicit,
                       .bytes = static_cast<uint64_t>(std::llround(decimal_gb * kBytesPerGb))};
}

const char* pool_flag_name(PoolFlag flag) {
    return flag == PoolFlag::HostPool ? "--host-pool-gb" : "--pool-gb";
}

PoolSetting parse_pool_setting(std::string_view text, PoolFlag flag) {
    const std::string_view value = trim(text);
    if (value == "adaptive") return PoolSetting::of(PoolMode::Adaptive);
    if (value == "max") return PoolSetting::of(PoolMode::Max);
    if (value == "mapped") return PoolSetting::of(PoolMode::Mapped);
    if (value == "staging" && flag == PoolFlag::HostPool) return PoolSetting::of(PoolMode::Staging);
    // Plain decimals only: no sign, exponent, "nan" or unit, which from_chars alone would take.
    const bool plain_decimal = !value.empty() &&
                               value.find_first_not_of("0123456789.") == std::string::npos &&
                               std::count(value.begin(), value.end(), '.') <= 1 && value != ".";
    double gb = 0.0;
    if (plain_decimal) {
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), gb);
        if (ec != std::errc() || end != value.data() + value.size()) gb = -1.0;
    }
    if (!plain_decimal || gb < 0.0 || gb > kMaxGb) {
        throw_invalid(std::string(pool_flag_name(flag)) + " '" + std::string(text) +
                      "': expected a decimal number of GB (for example 12 or 0.5), " +
                      (flag == PoolFlag::HostPool ? "'staging', " : "") +
                      "'max', 'mapped' or 'adaptive'");
    }
    return PoolSetting::gb(gb);
}

std::string pool_setting_text(const PoolSetting& setting) {
    switch (setting.mode) {
        case PoolMode::Adaptive: return "adaptive";
        case PoolMode::Max: return "max";
        case PoolMode::Mapped: return "mapped";
        case PoolMode::Staging: return "staging";
        case PoolMode::Explicit: break;
    }
    // Fixed notation, shortest digits that read back: 20 GB is "20", 1e6 GB "1000000".
    char text[64];
    const double gb = static_cast<double>(setting.bytes) / kBytesPerGb;
    const auto result = std::to_chars(text, text + sizeof text, gb, std::chars_format::fixed);
    return std::string(text, result.ptr);
}

}  // namespace cherenkov::engine
