#include "cli/flag_range.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace cherenkov::cli {
namespace {

// The whole text as an integer, or nullopt (CLI11 converts after validating, so the value may
// still be any text here).
std::optional<int64_t> parse_integer(const std::string& text) {
    int64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end) return std::nullopt;
    return value;
}

std::string real_text(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

CLI::Validator integer_check(int64_t min, std::optional<int64_t> max, const std::string& bounds) {
    return CLI::Validator(
        [min, max, bounds](std::string& input) -> std::string {
            const std::optional<int64_t> value = parse_integer(input);
            if (!value) return "expected an integer " + bounds + ", got '" + input + "'";
            if (*value < min || (max && *value > *max))
                return "must be " + bounds + ", got " + input;
            return {};
        },
        bounds);
}

}  // namespace

CLI::Validator at_least(int64_t min) {
    return integer_check(min, std::nullopt, "at least " + std::to_string(min));
}

CLI::Validator in_range(int64_t min, int64_t max) {
    return integer_check(min, max, std::to_string(min) + " to " + std::to_string(max));
}

CLI::Validator in_real_range(double min, double max) {
    const std::string bounds = real_text(min) + " to " + real_text(max);
    return CLI::Validator(
        [min, max, bounds](std::string& input) -> std::string {
            double value = 0.0;
            const char* end = input.data() + input.size();
            const auto [ptr, ec] = std::from_chars(input.data(), end, value);
            if (ec != std::errc() || ptr != end || !std::isfinite(value))
                return "expected a number " + bounds + ", got '" + input + "'";
            if (value < min || value > max) return "must be " + bounds + ", got " + input;
            return {};
        },
        bounds);
}

}  // namespace cherenkov::cli
