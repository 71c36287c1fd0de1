// The JSON value types a tool parameter's schema allows, and conversion of the raw text the model
// writes between <parameter=NAME> and </parameter> into a JSON value of one of those types.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cherenkov::text {

enum class JsonType : uint8_t { Null, Boolean, Integer, Number, String, Object, Array };

std::string_view json_type_name(JsonType type);

// A set of JsonType. Empty means the schema does not constrain the type (no `type`, `anyOf`,
// `enum` or `const` we can read); such values stay strings, as vLLM's Qwen3-Coder parser does.
class JsonTypeSet {
public:
    JsonTypeSet() = default;

    void add(JsonType type) { bits_ |= bit(type); }
    void add(JsonTypeSet other) { bits_ |= other.bits_; }
    bool contains(JsonType type) const { return (bits_ & bit(type)) != 0; }
    bool empty() const { return bits_ == 0; }
    bool operator==(const JsonTypeSet&) const = default;

    // "integer or null", "string", "any" for the empty set.
    std::string describe() const;

private:
    static uint8_t bit(JsonType type) { return static_cast<uint8_t>(1u << static_cast<int>(type)); }

    uint8_t bits_ = 0;
};

// Reads `type` (a name or a list of names), `anyOf`/`oneOf` branches (their union; one
// unconstrained branch makes the whole set unconstrained), else `enum`/`const` values, else
// `properties` (object) or `items` (array). Anything unreadable contributes nothing.
JsonTypeSet json_types_of_schema(const nlohmann::ordered_json& schema);

struct ConvertedValue {
    nlohmann::ordered_json value;
    bool matches = true;  // false: no allowed type fits, `value` is the text as a string
};

// Converts parameter text (already stripped of the template's newlines) to the first allowed
// type that fits, trying null ("null"/"None"), boolean (true/false, any case), integer, number,
// object, array (JSON, surrounding whitespace ignored), then string (the text verbatim).
// Strings in the result are valid UTF-8 (invalid bytes become U+FFFD).
ConvertedValue convert_parameter_value(std::string_view text, JsonTypeSet types);

// `text` with each invalid UTF-8 sequence replaced by U+FFFD, so it can be dumped as JSON.
std::string replace_invalid_utf8(std::string_view text);

}  // namespace cherenkov::text
