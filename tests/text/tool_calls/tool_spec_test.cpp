#include "text/tool_calls/tool_spec.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::text {
namespace {

using Json = nlohmann::ordered_json;

// The message of the InvalidInput error parse_tool_request throws for `body`.
std::string request_error(const std::string& body) {
    try {
        parse_tool_request(Json::parse(body));
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput) << error.what();
        return error.what();
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
}

TEST(ToolSpec, ParsesFunctionTools) {
    ToolRequest request = parse_tool_request(Json::parse(R"({
      "model": "cherenkov",
      "tools": [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
          "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
            "required": ["city"]}, "strict": false}},
        {"type": "function", "function": {"name": "No-Args_2"}}
      ],
      "tool_choice": "auto",
      "parallel_tool_calls": true
    })"));
    ASSERT_EQ(request.tools.size(), 2u);
    EXPECT_EQ(request.choice, ToolChoice::Auto);
    EXPECT_TRUE(request.calls_enabled());

    const ToolSpec& weather = request.tools[0];
    EXPECT_EQ(weather.name, "get_weather");
    EXPECT_EQ(weather.description, "Weather.");
    EXPECT_EQ(weather.parameters["required"], Json::parse(R"(["city"])"));
    ASSERT_EQ(weather.param_types.size(), 2u);
    EXPECT_EQ(weather.param_types.at("city").describe(), "string");
    EXPECT_EQ(weather.param_types.at("days").describe(), "null or integer");
    EXPECT_EQ(weather.request_json["function"]["strict"], false);

    const ToolSpec& bare = request.tools[1];
    EXPECT_EQ(bare.name, "No-Args_2");
    EXPECT_FALSE(bare.description.has_value());
    EXPECT_EQ(bare.parameters, Json::parse(R"({"type":"object","properties":{}})"));
    EXPECT_TRUE(bare.param_types.empty());
    EXPECT_FALSE(bare.request_json["function"].contains("parameters"));
}

TEST(ToolSpec, KeepsPropertyOrder) {
    std::vector<ToolSpec> tools = parse_tools(Json::parse(R"([{"type": "function",
        "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"z": {}, "a": {}, "m": {}}}}}])"));
    EXPECT_EQ(tools[0].parameters["properties"].dump(), R"({"z":{},"a":{},"m":{}})");
}

TEST(ToolSpec, SchemaWithoutTypeButWithPropertiesIsAnObjectSchema) {
    std::vector<ToolSpec> tools = parse_tools(Json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"properties": {}}}}])"));
    EXPECT_EQ(tools[0].parameters["type"], "object");
}

TEST(ToolSpec, AbsentOrNullMembersMeanDefaults) {
    ToolRequest request = parse_tool_request(
        Json::parse(R"({"tools": null, "tool_choice": null, "parallel_tool_calls": null})"));
    EXPECT_TRUE(request.tools.empty());
    EXPECT_EQ(request.choice, ToolChoice::Auto);
    EXPECT_FALSE(request.calls_enabled());
    EXPECT_FALSE(parse_tool_request(Json::parse(R"({"messages": []})")).calls_enabled());
}

TEST(ToolSpec, ToolChoiceNoneDisablesCalls) {
    ToolRequest request = parse_tool_request(Json::parse(
        R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})"));
    EXPECT_EQ(request.choice, ToolChoice::None);
    EXPECT_FALSE(request.calls_enabled());
}

TEST(ToolSpec, RejectsBadToolsWithJsonPaths) {
    struct Case {
        const char* body;
        const char* message;
    };
    const Case cases[] = {
        {R"({"tools": {}})", "tools: must be an array, got object"},
        {R"({"tools": [1]})", "tools[0]: must be an object, got number"},
        {R"({"tools": [{"function": {"name": "f"}}]})", "tools[0].type: missing"},
        {R"({"tools": [{"type": "retrieval", "function": {"name": "f"}}]})",
         "tools[0].type: must be \"function\", got \"retrieval\""},
        {R"({"tools": [{"type": "function"}]})", "tools[0].function: missing"},
        {R"({"tools": [{"type": "function", "function": "f"}]})",
         "tools[0].function: must be an object, got string"},
        {R"({"tools": [{"type": "function", "function": {"name": "f"}, "x": 1}]})",
         "tools[0].x: unknown field"},
        {R"({"tools": [{"type": "function", "function": {"name": "f", "returns": {}}}]})",
         "tools[0].function.returns: unknown field"},
        {R"({"tools": [{"type": "function", "function": {}}]})", "tools[0].function.name: missing"},
        {R"({"tools": [{"type": "function", "function": {"name": "f"}},
                       {"type": "function", "function": {"name": "get weather"}}]})",
         "tools[1].function.name: must match ^[a-zA-Z0-9_-]{1,64}$, got \"get weather\""},
        {R"({"tools": [{"type": "function", "function": {"name": ""}}]})",
         "tools[0].function.name: must match"},
        {R"({"tools": [{"type": "function", "function": {"name": 7}}]})",
         "tools[0].function.name: must be a string, got number"},
        {R"({"tools": [{"type": "function", "function": {"name":
            "a1234567890123456789012345678901234567890123456789012345678901234"}}]})",
         "tools[0].function.name: must match"},
        {R"({"tools": [{"type": "function", "function": {"name": "f"}},
                       {"type": "function", "function": {"name": "f"}}]})",
         "tools[1].function.name: duplicate function name \"f\""},
        {R"({"tools": [{"type": "function", "function": {"name": "f", "description": 3}}]})",
         "tools[0].function.description: must be a string, got number"},
        {R"({"tools": [{"type": "function", "function": {"name": "f", "strict": true}}]})",
         "tools[0].function.strict: strict: true is not supported"},
        {R"({"tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]})",
         "tools[0].function.strict: must be a boolean"},
        {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})",
         "tools[0].function.parameters: must be an object schema, got array"},
        {R"({"tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "string"}}}]})",
         "tools[0].function.parameters.type: must be \"object\", got \"string\""},
        {R"({"tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": ["object", "null"]}}}]})",
         "tools[0].function.parameters.type: must be \"object\""},
        {R"({"tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": []}}}]})",
         "tools[0].function.parameters.properties: must be an object, got array"},
        {R"({"tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {"a": "string"}}}}]})",
         "tools[0].function.parameters.properties.a: must be a schema object, got string"},
        {R"({"tools": [{"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "required": ["a", 1]}}}]})",
         "tools[0].function.parameters.required[1]: must be a string"},
    };
    for (const Case& item : cases) {
        std::string message = request_error(item.body);
        EXPECT_EQ(message.rfind(item.message, 0), 0u) << "got: " << message;
    }
}

TEST(ToolSpec, RejectsUnsupportedToolChoice) {
    const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
    EXPECT_NE(request_error("{" + tools + R"(, "tool_choice": "required"})")
                  .find("tool_choice: \"required\" is not supported: the checkpoint cannot be "
                        "obligated to call a function"),
              std::string::npos);
    EXPECT_EQ(request_error("{" + tools +
                            R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})")
                  .rfind("tool_choice: choosing a specific function is not supported", 0),
              0u);
    EXPECT_EQ(request_error(R"({"tool_choice": "any"})"),
              "tool_choice: must be \"auto\" or \"none\", got \"any\"");
    EXPECT_EQ(request_error(R"({"tool_choice": 1})"),
              "tool_choice: must be \"auto\" or \"none\", got number");
}

TEST(ToolSpec, ParallelToolCallsOnlyTrueWithToolsEnabled) {
    const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
    EXPECT_NO_THROW(
        parse_tool_request(Json::parse("{" + tools + R"(, "parallel_tool_calls": true})")));
    EXPECT_EQ(request_error("{" + tools + R"(, "parallel_tool_calls": false})")
                  .rfind("parallel_tool_calls: only true is supported", 0),
              0u);
    EXPECT_EQ(request_error(R"({"parallel_tool_calls": true})")
                  .rfind("parallel_tool_calls: allowed only while tools are enabled", 0),
              0u);
    EXPECT_EQ(
        request_error("{" + tools + R"(, "tool_choice": "none", "parallel_tool_calls": true})")
            .rfind("parallel_tool_calls: allowed only while tools are enabled", 0),
        0u);
    EXPECT_EQ(request_error(R"({"parallel_tool_calls": "true"})"),
              "parallel_tool_calls: must be a boolean, got string");
}

TEST(ToolSpec, LongBadNameIsClippedInTheMessage) {
    std::string name(500, 'x');
    name[3] = ' ';
    std::string message = request_error(
        R"({"tools": [{"type": "function", "function": {"name": ")" + name + R"("}}]})");
    EXPECT_LT(message.size(), 200u);
}

}  // namespace
}  // namespace cherenkov::text
