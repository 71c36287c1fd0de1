// JsonField accessors: type checks with the field path in every message.
#include "text/tokenizer/json_field.h"

#include "base/error.h"

namespace cherenkov::text {
namespace {

std::string type_name(const nlohmann::json& value) {
    return value.type_name();
}

}  // namespace

nlohmann::json JsonField::parse(std::string_view text) {
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        throw_corrupt(std::string("not valid JSON: ") + e.what());
    }
}

std::string JsonField::child_path(std::string_view key) const {
    if (path_.empty()) return std::string(key);
    return path_ + "." + std::string(key);
}

void JsonField::expect_object() const {
    if (!value_->is_object()) fail("expected an object, got " + type_name(*value_));
}

JsonField JsonField::at(std::string_view key) const {
    expect_object();
    const auto found = value_->find(key);
    if (found == value_->end()) throw_corrupt(child_path(key) + ": missing");
    return JsonField(*found, child_path(key));
}

std::optional<JsonField> JsonField::find(std::string_view key) const {
    expect_object();
    const auto found = value_->find(key);
    if (found == value_->end() || found->is_null()) return std::nullopt;
    return JsonField(*found, child_path(key));
}

JsonField JsonField::at(size_t index) const {
    if (!value_->is_array()) fail("expected an array, got " + type_name(*value_));
    return JsonField((*value_)[index], path_ + "[" + std::to_string(index) + "]");
}

size_t JsonField::array_size() const {
    if (!value_->is_array()) fail("expected an array, got " + type_name(*value_));
    return value_->size();
}

std::string JsonField::as_string() const {
    if (!value_->is_string()) fail("expected a string, got " + type_name(*value_));
    return value_->get<std::string>();
}

bool JsonField::as_bool() const {
    if (!value_->is_boolean()) fail("expected true or false, got " + type_name(*value_));
    return value_->get<bool>();
}

int64_t JsonField::as_int() const {
    if (value_->is_number_unsigned()) {
        const auto value = value_->get<uint64_t>();
        if (value > static_cast<uint64_t>(INT64_MAX)) fail("integer is too large");
        return static_cast<int64_t>(value);
    }
    if (!value_->is_number_integer()) fail("expected an integer, got " + type_name(*value_));
    return value_->get<int64_t>();
}

bool JsonField::bool_or(std::string_view key, bool fallback) const {
    const std::optional<JsonField> member = find(key);
    return member ? member->as_bool() : fallback;
}

std::optional<std::string> JsonField::optional_string(std::string_view key) const {
    const std::optional<JsonField> member = find(key);
    if (!member) return std::nullopt;
    return member->as_string();
}

void JsonField::fail(const std::string& message) const {
    throw_corrupt((path_.empty() ? std::string("(root)") : path_) + ": " + message);
}

void JsonField::unsupported(const std::string& message) const {
    throw_unsupported((path_.empty() ? std::string("(root)") : path_) + ": " + message);
}

}  // namespace cherenkov::text
