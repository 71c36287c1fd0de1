// Schema type sets and parameter text conversion for the tool-call parser.
#include "text/tool_calls/json_type_set.h"

#include <cmath>
#include <cstddef>
#include <optional>

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;

// Deeper JSON than this stays a string: nlohmann's dump() recurses once per level.
constexpr size_t kMaxNestingDepth = 128;

constexpr JsonType kAllTypes[] = {JsonType::Null,   JsonType::Boolean, JsonType::Integer,
                                  JsonType::Number, JsonType::String,  JsonType::Object,
                                  JsonType::Array};

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

bool equals_ignoring_case(std::string_view text, std::string_view lower) {
    if (text.size() != lower.size()) return false;
    for (size_t index = 0; index < text.size(); ++index) {
        char c = text[index];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != lower[index]) return false;
    }
    return true;
}

bool add_type_name(std::string_view name, JsonTypeSet& types) {
    for (JsonType type : kAllTypes) {
        if (json_type_name(type) == name) {
            types.add(type);
            return true;
        }
    }
    return false;
}

JsonType type_of_value(const Json& value) {
    if (value.is_null()) return JsonType::Null;
    if (value.is_boolean()) return JsonType::Boolean;
    if (value.is_number_integer()) return JsonType::Integer;
    if (value.is_number()) return JsonType::Number;
    if (value.is_string()) return JsonType::String;
    if (value.is_object()) return JsonType::Object;
    return JsonType::Array;
}

JsonTypeSet types_of_branches(const Json& branches) {
    JsonTypeSet types;
    for (const Json& branch : branches) {
        JsonTypeSet branch_types = json_types_of_schema(branch);
        if (branch_types.empty()) return JsonTypeSet();
        types.add(branch_types);
    }
    return types;
}

// JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_json_number(std::string_view text) {
    size_t at = 0;
    auto digits = [&] {
        size_t start = at;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
        return at > start;
    };
    if (at < text.size() && text[at] == '-') ++at;
    if (at < text.size() && text[at] == '0') {
        ++at;
    } else if (!digits()) {
        return false;
    }
    if (at < text.size() && text[at] == '.') {
        ++at;
        if (!digits()) return false;
    }
    if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
        ++at;
        if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
        if (!digits()) return false;
    }
    return at == text.size();
}

// Largest depth of [ and { outside strings; stops counting past the limit.
size_t nesting_depth(std::string_view text) {
    size_t depth = 0;
    size_t max_depth = 0;
    bool in_string = false;
    for (size_t at = 0; at < text.size(); ++at) {
        char c = text[at];
        if (in_string) {
            if (c == '\\') {
                ++at;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            ++depth;
            if (depth > max_depth) max_depth = depth;
            if (max_depth > kMaxNestingDepth) return max_depth;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return max_depth;
}

std::optional<Json> parse_number(std::string_view text, JsonTypeSet types) {
    if (!is_json_number(text)) return std::nullopt;
    Json number = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!number.is_number()) return std::nullopt;
    if (number.is_number_float()) {
        double value = number.get<double>();
        if (!std::isfinite(value)) return std::nullopt;
        // 5.0 or 1e3 for an integer parameter is that integer (JSON Schema counts it as one).
        constexpr double kInt64Limit = 9223372036854775808.0;  // 2^63
        if (types.contains(JsonType::Integer) && value == std::floor(value) &&
            value >= -kInt64Limit && value < kInt64Limit) {
            return Json(static_cast<int64_t>(value));
        }
        if (!types.contains(JsonType::Number)) return std::nullopt;
    }
    return number;
}

std::optional<Json> parse_container(std::string_view text, JsonTypeSet types) {
    bool object = !text.empty() && text.front() == '{' && types.contains(JsonType::Object);
    bool array = !text.empty() && text.front() == '[' && types.contains(JsonType::Array);
    if (!object && !array) return std::nullopt;
    if (nesting_depth(text) > kMaxNestingDepth) return std::nullopt;
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (object && value.is_object()) return value;
    if (array && value.is_array()) return value;
    return std::nullopt;
}

// Length of the valid UTF-8 sequence at text[at], or 0 when it is invalid or cut short.
size_t utf8_sequence_length(std::string_view text, size_t at) {
    auto byte = [&](size_t offset) { return static_cast<unsigned char>(text[at + offset]); };
    unsigned char lead = byte(0);
    if (lead < 0x80) return 1;
    size_t length = 0;
    unsigned char min_second = 0x80;
    unsigned char max_second = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) min_second = 0xA0;  // overlong
        if (lead == 0xED) max_second = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) min_second = 0x90;  // overlong
        if (lead == 0xF4) max_second = 0x8F;  // above U+10FFFF
    } else {
        return 0;
    }
    if (at + length > text.size()) return 0;
    if (byte(1) < min_second || byte(1) > max_second) return 0;
    for (size_t offset = 2; offset < length; ++offset) {
        if ((byte(offset) & 0xC0) != 0x80) return 0;
    }
    return length;
}

}  // namespace

std::string_view json_type_name(JsonType type) {
    switch (type) {
        case JsonType::Null: return "null";
        case JsonType::Boolean: return "boolean";
        case JsonType::Integer: return "integer";
        case JsonType::Number: return "number";
        case JsonType::String: return "string";
        case JsonType::Object: return "object";
        case JsonType::Array: return "array";
    }
    return "unknown";
}

std::string JsonTypeSet::describe() const {
    if (empty()) return "any";
    std::string text;
    for (JsonType type : kAllTypes) {
        if (!contains(type)) continue;
        if (!text.empty()) text += " or ";
        text += json_type_name(type);
    }
    return text;
}

JsonTypeSet json_types_of_schema(const Json& schema) {
    JsonTypeSet types;
    if (!schema.is_object()) return types;
    if (auto type = schema.find("type"); type != schema.end()) {
        if (type->is_string()) add_type_name(type->get_ref<const std::string&>(), types);
        if (type->is_array()) {
            for (const Json& name : *type) {
                if (name.is_string()) add_type_name(name.get_ref<const std::string&>(), types);
            }
        }
    }
    for (const char* key : {"anyOf", "oneOf"}) {
        auto branches = schema.find(key);
        if (branches == schema.end() || !branches->is_array() || branches->empty()) continue;
        JsonTypeSet branch_types = types_of_branches(*branches);
        if (branch_types.empty()) return JsonTypeSet();
        types.add(branch_types);
    }
    if (!types.empty()) return types;
    if (auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
        for (const Json& value : *values) types.add(type_of_value(value));
        return types;
    }
    if (auto value = schema.find("const"); value != schema.end()) {
        types.add(type_of_value(*value));
        return types;
    }
    if (schema.contains("properties")) types.add(JsonType::Object);
    if (schema.contains("items")) types.add(JsonType::Array);
    return types;
}

ConvertedValue convert_parameter_value(std::string_view text, JsonTypeSet types) {
    JsonTypeSet string_only;
    string_only.add(JsonType::String);
    if (types.empty() || types == string_only) {
        return {Json(replace_invalid_utf8(text)), true};
    }
    std::string_view trimmed = trim(text);
    if (types.contains(JsonType::Null) &&
        (equals_ignoring_case(trimmed, "null") || trimmed == "None")) {
        return {Json(nullptr), true};
    }
    if (types.contains(JsonType::Boolean)) {
        if (equals_ignoring_case(trimmed, "true")) return {Json(true), true};
        if (equals_ignoring_case(trimmed, "false")) return {Json(false), true};
    }
    if (types.contains(JsonType::Integer) || types.contains(JsonType::Number)) {
        if (auto number = parse_number(trimmed, types)) return {std::move(*number), true};
    }
    if (types.contains(JsonType::Object) || types.contains(JsonType::Array)) {
        // nlohmann's parser rejects invalid UTF-8 inside strings, so the result is valid.
        if (auto container = parse_container(trimmed, types)) return {std::move(*container), true};
    }
    bool is_string = types.contains(JsonType::String);
    return {Json(replace_invalid_utf8(text)), is_string};
}

std::string replace_invalid_utf8(std::string_view text) {
    std::string result;
    result.reserve(text.size());
    size_t at = 0;
    while (at < text.size()) {
        size_t length = utf8_sequence_length(text, at);
        if (length == 0) {
            result += "\xEF\xBF\xBD";
            ++at;
            continue;
        }
        result.append(text.data() + at, length);
        at += length;
    }
    return result;
}

}  // namespace cherenkov::text
