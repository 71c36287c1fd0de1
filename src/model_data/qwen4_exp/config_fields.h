// Typed reads of one JSON object of a config file. Every failure is a cherenkov::Error whose
// message is "<file>: <field path>: <what is wrong>", so no nlohmann exception leaks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace cherenkov::model_data::qwen4_exp {

[[noreturn]] void fail_field(const std::string& file_name, const std::string& path,
                             const std::string& message, ErrorKind kind = ErrorKind::InvalidInput);

// Shortest round-trip text of a double ("1e-06", "0.25").
std::string format_number(double value);

// A view of one JSON object at `prefix` ("" or "text_config."). The object and file name must
// outlive the reader.
class FieldReader {
public:
    FieldReader(const nlohmann::json& object, std::string prefix, const std::string& file_name);

    const std::string& file() const { return *file_name_; }
    std::string path(std::string_view key) const { return prefix_ + std::string(key); }

    const nlohmann::json* find(std::string_view key) const;  // nullptr when absent
    bool has(std::string_view key) const;                    // present and not null
    bool is_null(std::string_view key) const;                // present and null

    // The object at `key` (which must be an object) with the prefix extended.
    FieldReader nested(std::string_view key) const;

    [[noreturn]] void fail(std::string_view key, const std::string& message,
                           ErrorKind kind = ErrorKind::InvalidInput) const;

    // Absent → fallback; null or a wrong type fails; the value must lie in [min, max].
    int64_t get_int(std::string_view key, int64_t fallback, int64_t min, int64_t max) const;
    // Absent or null → nullopt.
    std::optional<int64_t> get_optional_int(std::string_view key, int64_t min, int64_t max) const;
    // Any integer in [-2^63, 2^64); negative values are kept as two's complement.
    uint64_t get_u64(std::string_view key) const;
    // Any finite number (integer or float).
    double get_number(std::string_view key, double fallback) const;
    bool get_bool(std::string_view key, bool fallback) const;
    std::string get_string(std::string_view key, const std::string& fallback) const;
    // A list of integers, each in [min, max]; errors name "key[i]".
    std::vector<int64_t> get_int_list(std::string_view key, int64_t min, int64_t max) const;

private:
    const nlohmann::json& require(std::string_view key) const;
    int64_t to_int(const nlohmann::json& value, const std::string& field, int64_t min,
                   int64_t max) const;

    const nlohmann::json* object_;
    std::string prefix_;
    const std::string* file_name_;
};

}  // namespace cherenkov::model_data::qwen4_exp
