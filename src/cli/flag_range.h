// Parse-time range checks for numeric flags whose messages give the real bounds
// ("--max-ctx: must be at least 1, got 0"), in place of CLI::PositiveNumber and
// CLI::NonNegativeNumber, whose messages print double's 300-digit limits. A failed check is a
// usage error (exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace cherenkov::cli {

// An integer of at least `min`.
CLI::Validator at_least(int64_t min);
// An integer from `min` to `max`, both included.
CLI::Validator in_range(int64_t min, int64_t max);
// A finite real number from `min` to `max`, both included.
CLI::Validator in_real_range(double min, double max);

}  // namespace cherenkov::cli
