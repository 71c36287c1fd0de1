// A JSON value together with its path from the document root ("model.merges[3]"), so every
// parse error names the field it is about. Errors are Corrupt; the caller adds the file name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace cherenkov::text {

class JsonField {
public:
    JsonField(const nlohmann::json& value, std::string path)
        : value_(&value), path_(std::move(path)) {}

    // Parses `text`; throws Corrupt "not valid JSON: ..." with the byte position.
    static nlohmann::json parse(std::string_view text);

    const nlohmann::json& value() const { return *value_; }
    const std::string& path() const { return path_; }
    bool is_null() const { return value_->is_null(); }

    // A member that must be present (null counts as present).
    JsonField at(std::string_view key) const;
    // A member that may be absent or null.
    std::optional<JsonField> find(std::string_view key) const;
    JsonField at(size_t index) const;
    size_t array_size() const;
    void expect_object() const;

    std::string as_string() const;
    bool as_bool() const;
    int64_t as_int() const;
    // The member's value when present and not null, else `fallback`.
    bool bool_or(std::string_view key, bool fallback) const;
    std::optional<std::string> optional_string(std::string_view key) const;

    [[noreturn]] void fail(const std::string& message) const;
    [[noreturn]] void unsupported(const std::string& message) const;

private:
    std::string child_path(std::string_view key) const;

    const nlohmann::json* value_;
    std::string path_;
};

}  // namespace cherenkov::text
