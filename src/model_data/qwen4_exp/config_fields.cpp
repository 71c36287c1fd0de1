// Typed JSON field reads with file- and field-named errors (see config_fields.h).
#include "model_data/qwen4_exp/config_fields.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace cherenkov::model_data::qwen4_exp {

using nlohmann::json;

void fail_field(const std::string& file_name, const std::string& path, const std::string& message,
                ErrorKind kind) {
    throw Error(kind, file_name + ": " + path + ": " + message);
}

std::string format_number(double value) {
    char buffer[64];
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
        if (std::strtod(buffer, nullptr) == value) break;
    }
    return buffer;
}

FieldReader::FieldReader(const json& object, std::string prefix, const std::string& file_name)
    : object_(&object), prefix_(std::move(prefix)), file_name_(&file_name) {}

const json* FieldReader::find(std::string_view key) const {
    const auto it = object_->find(key);
    return it == object_->end() ? nullptr : &*it;
}

bool FieldReader::has(std::string_view key) const {
    const json* value = find(key);
    return value != nullptr && !value->is_null();
}

bool FieldReader::is_null(std::string_view key) const {
    const json* value = find(key);
    return value != nullptr && value->is_null();
}

FieldReader FieldReader::nested(std::string_view key) const {
    const json& value = require(key);
    if (!value.is_object()) {
        fail(key, std::string("expected an object, got ") + value.type_name());
    }
    return FieldReader(value, path(key) + ".", *file_name_);
}

void FieldReader::fail(std::string_view key, const std::string& message, ErrorKind kind) const {
    fail_field(*file_name_, path(key), message, kind);
}

const json& FieldReader::require(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) fail(key, "missing");
    return *value;
}

int64_t FieldReader::to_int(const json& value, const std::string& field, int64_t min,
                            int64_t max) const {
    if (!value.is_number_integer()) {
        fail_field(*file_name_, field,
                   std::string("expected an integer, got ") +
                       (value.is_number_float() ? "a fractional number" : value.type_name()));
    }
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail_field(*file_name_, field,
                   std::to_string(value.get<uint64_t>()) + " exceeds the supported maximum " +
                       std::to_string(max));
    }
    const auto number = value.get<int64_t>();
    if (number < min) {
        if (min == 1)
            fail_field(*file_name_, field, "must be positive, got " + std::to_string(number));
        if (min == 0) {
            fail_field(*file_name_, field, "must be non-negative, got " + std::to_string(number));
        }
        fail_field(*file_name_, field,
                   "must be at least " + std::to_string(min) + ", got " + std::to_string(number));
    }
    if (number > max) {
        fail_field(
            *file_name_, field,
            std::to_string(number) + " exceeds the supported maximum " + std::to_string(max));
    }
    return number;
}

int64_t FieldReader::get_int(std::string_view key, int64_t fallback, int64_t min,
                             int64_t max) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    return to_int(*value, path(key), min, max);
}

std::optional<int64_t> FieldReader::get_optional_int(std::string_view key, int64_t min,
                                                     int64_t max) const {
    if (!has(key)) return std::nullopt;
    return to_int(*find(key), path(key), min, max);
}

uint64_t FieldReader::get_u64(std::string_view key) const {
    const json& value = require(key);
    if (!value.is_number_integer()) {
        fail(key, std::string("expected an integer, got ") +
                      (value.is_number_float() ? "a fractional number" : value.type_name()));
    }
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    return static_cast<uint64_t>(value.get<int64_t>());
}

double FieldReader::get_number(std::string_view key, double fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) {
        fail(key, std::string("expected a number, got ") + value->type_name());
    }
    const auto number = value->get<double>();
    if (!std::isfinite(number)) fail(key, "expected a finite number");
    return number;
}

bool FieldReader::get_bool(std::string_view key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
        fail(key, std::string("expected true or false, got ") + value->type_name());
    }
    return value->get<bool>();
}

std::string FieldReader::get_string(std::string_view key, const std::string& fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) {
        fail(key, std::string("expected a string, got ") + value->type_name());
    }
    return value->get<std::string>();
}

std::vector<int64_t> FieldReader::get_int_list(std::string_view key, int64_t min,
                                               int64_t max) const {
    const json& value = require(key);
    if (!value.is_array()) {
        fail(key, std::string("expected a list of integers, got ") + value.type_name());
    }
    std::vector<int64_t> numbers;
    numbers.reserve(value.size());
    for (size_t index = 0; index < value.size(); ++index) {
        numbers.push_back(
            to_int(value[index], path(key) + "[" + std::to_string(index) + "]", min, max));
    }
    return numbers;
}

}  // namespace cherenkov::model_data::qwen4_exp
