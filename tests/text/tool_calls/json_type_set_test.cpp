#include "text/tool_calls/json_type_set.h"

#include <gtest/gtest.h>

namespace cherenkov::text {
namespace {

using Json = nlohmann::ordered_json;

JsonTypeSet types_of(const char* schema) {
    return json_types_of_schema(Json::parse(schema));
}

JsonTypeSet set_of(std::initializer_list<JsonType> types) {
    JsonTypeSet set;
    for (JsonType type : types) set.add(type);
    return set;
}

TEST(JsonTypeSet, ReadsTypeNamesAndLists) {
    EXPECT_EQ(types_of(R"({"type":"integer"})"), set_of({JsonType::Integer}));
    EXPECT_EQ(types_of(R"({"type":["string","null"]})"),
              set_of({JsonType::String, JsonType::Null}));
    EXPECT_EQ(types_of(R"({"type":"made-up"})"), JsonTypeSet());
    EXPECT_EQ(types_of(R"({"description":"free"})"), JsonTypeSet());
    EXPECT_EQ(types_of("true"), JsonTypeSet());
}

TEST(JsonTypeSet, ReadsAnyOfOneOfEnumConstAndImpliedTypes) {
    EXPECT_EQ(types_of(R"({"anyOf":[{"type":"number"},{"type":"null"}]})"),
              set_of({JsonType::Number, JsonType::Null}));
    EXPECT_EQ(types_of(R"({"oneOf":[{"type":"boolean"},{"type":["array","object"]}]})"),
              set_of({JsonType::Boolean, JsonType::Array, JsonType::Object}));
    EXPECT_EQ(types_of(R"({"anyOf":[{"type":"number"},{}]})"), JsonTypeSet());
    EXPECT_EQ(types_of(R"({"enum":["a", 1, null]})"),
              set_of({JsonType::String, JsonType::Integer, JsonType::Null}));
    EXPECT_EQ(types_of(R"({"const":2.5})"), set_of({JsonType::Number}));
    EXPECT_EQ(types_of(R"({"properties":{}})"), set_of({JsonType::Object}));
    EXPECT_EQ(types_of(R"({"items":{"type":"string"}})"), set_of({JsonType::Array}));
}

TEST(JsonTypeSet, Describes) {
    EXPECT_EQ(JsonTypeSet().describe(), "any");
    EXPECT_EQ(set_of({JsonType::Array, JsonType::Null}).describe(), "null or array");
}

struct Case {
    const char* text;
    std::initializer_list<JsonType> types;
    const char* expected_json;
    bool matches;
};

TEST(ConvertParameterValue, ConvertsToTheDeclaredType) {
    const Case cases[] = {
        {"hello", {JsonType::String}, R"("hello")", true},
        {" 12 ", {JsonType::String}, R"(" 12 ")", true},
        {"", {JsonType::String}, R"("")", true},
        {"42", {JsonType::Integer}, "42", true},
        {" -7\n", {JsonType::Integer}, "-7", true},
        {"5.0", {JsonType::Integer}, "5", true},
        {"1e3", {JsonType::Integer}, "1000", true},
        {"123456789012345678901234", {JsonType::Integer}, R"("123456789012345678901234")", false},
        {"1.5", {JsonType::Integer}, R"("1.5")", false},
        {"007", {JsonType::Integer}, R"("007")", false},
        {"+1", {JsonType::Integer}, R"("+1")", false},
        {"0x10", {JsonType::Integer}, R"("0x10")", false},
        {"2.5", {JsonType::Number}, "2.5", true},
        {"3", {JsonType::Number}, "3", true},
        {"-0.5e-2", {JsonType::Number}, "-0.005", true},
        {"1e999", {JsonType::Number}, R"("1e999")", false},
        {"NaN", {JsonType::Number}, R"("NaN")", false},
        {".5", {JsonType::Number}, R"(".5")", false},
        {"true", {JsonType::Boolean}, "true", true},
        {"False", {JsonType::Boolean}, "false", true},
        {"TRUE", {JsonType::Boolean}, "true", true},
        {"1", {JsonType::Boolean}, R"("1")", false},
        {"null", {JsonType::Null}, "null", true},
        {"None", {JsonType::Null}, "null", true},
        {"", {JsonType::Null}, R"("")", false},
        {R"({"a": [1, {"b": null}]})", {JsonType::Object}, R"({"a":[1,{"b":null}]})", true},
        {"{'a': 1}", {JsonType::Object}, R"("{'a': 1}")", false},
        {"[1, 2]", {JsonType::Object}, R"("[1, 2]")", false},
        {"\n[1, \"x\"]\n", {JsonType::Array}, R"([1,"x"])", true},
        {"[1,", {JsonType::Array}, R"("[1,")", false},
        {"null", {JsonType::String, JsonType::Null}, "null", true},
        {"text", {JsonType::String, JsonType::Null}, R"("text")", true},
        {"12", {JsonType::String, JsonType::Integer}, "12", true},
        {"12", {JsonType::Number, JsonType::Null}, "12", true},
        {"[]", {JsonType::Array, JsonType::Object}, "[]", true},
        {"{}", {JsonType::Array, JsonType::Object}, "{}", true},
        {"anything", {}, R"("anything")", true},
        {"42", {}, R"("42")", true},
    };
    for (const Case& item : cases) {
        ConvertedValue converted = convert_parameter_value(item.text, set_of(item.types));
        EXPECT_EQ(converted.value, Json::parse(item.expected_json)) << item.text;
        EXPECT_EQ(converted.matches, item.matches) << item.text;
    }
}

TEST(ConvertParameterValue, KeepsKeyOrderOfObjects) {
    ConvertedValue converted =
        convert_parameter_value(R"({"z": 1, "a": 2})", set_of({JsonType::Object}));
    EXPECT_EQ(converted.value.dump(), R"({"z":1,"a":2})");
}

TEST(ConvertParameterValue, DeepNestingStaysAString) {
    std::string deep = std::string(5000, '[') + std::string(5000, ']');
    ConvertedValue converted = convert_parameter_value(deep, set_of({JsonType::Array}));
    EXPECT_FALSE(converted.matches);
    EXPECT_TRUE(converted.value.is_string());
    std::string ok = std::string(100, '[') + std::string(100, ']');
    EXPECT_TRUE(convert_parameter_value(ok, set_of({JsonType::Array})).matches);
}

TEST(ConvertParameterValue, InvalidUtf8IsReplaced) {
    ConvertedValue as_string = convert_parameter_value("a\xc3(b", set_of({JsonType::String}));
    EXPECT_EQ(as_string.value, "a\xEF\xBF\xBD(b");
    ConvertedValue as_object =
        convert_parameter_value("{\"k\": \"\xff\"}", set_of({JsonType::Object}));
    EXPECT_FALSE(as_object.matches);
    EXPECT_NO_THROW(as_object.value.dump());
}

TEST(ReplaceInvalidUtf8, KeepsValidTextAndReplacesEachBadByte) {
    EXPECT_EQ(replace_invalid_utf8("plain ü 😀 東"), "plain ü 😀 東");
    EXPECT_EQ(replace_invalid_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(replace_invalid_utf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(replace_invalid_utf8("x\xf0\x9f"), "x\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace cherenkov::text
