// The Messages body parser: Anthropic's fields land in the chat request the OpenAI endpoint
// makes (system, text blocks, tool_use and tool_result mapped onto chat messages, tools onto
// function tools), and refused or malformed fields are 400s naming the field.
#include "serving/anthropic/messages_request.h"

#include <gtest/gtest.h>

#include "serving/api_error.h"

namespace cherenkov::serving::anthropic {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kUser = R"("max_tokens":8,"messages":[{"role":"user","content":"hi"}])";

std::string with(const std::string& fields) {
    return std::string("{") + kUser + (fields.empty() ? "" : ",") + fields + "}";
}

// The message of the 400 `body` gets (which starts with the field's path).
std::string refusal(const std::string& body, const MessagesParseOptions& options = {}) {
    try {
        parse_messages_request(body, options);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << body;
    return "<accepted>";
}

const std::string& text_of(const text::ChatMessage& m) {
    return std::get<std::string>(m.content);
}

TEST(MessagesRequest, FieldsAreRead) {
    const CompletionRequest r = parse_messages_request(
        with(R"("model":"claude-x","temperature":0.5,"top_p":0.9,"top_k":20,"stream":true,)"
             R"("stop_sequences":["END","\n\n"],"metadata":{"user_id":"u"},"service_tier":"auto",)"
             R"("thinking":{"type":"disabled"},"system":"Be brief.")"));
    EXPECT_EQ(r.endpoint, Endpoint::Chat);
    EXPECT_EQ(r.model, "claude-x");
    EXPECT_EQ(r.max_tokens, 8);
    EXPECT_FLOAT_EQ(*r.sampling.temperature, 0.5F);
    EXPECT_FLOAT_EQ(*r.sampling.top_p, 0.9F);
    EXPECT_EQ(*r.sampling.top_k, 20);
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "\n\n"}));
    ASSERT_EQ(r.messages.size(), 2U);
    EXPECT_EQ(r.messages[0].role, text::Role::System);
    EXPECT_EQ(text_of(r.messages[0]), "Be brief.");
    EXPECT_EQ(r.messages[1].role, text::Role::User);
    EXPECT_EQ(text_of(r.messages[1]), "hi");
    EXPECT_FALSE(r.tools.calls_enabled());
}

TEST(MessagesRequest, TextBlocksAreJoinedIntoTheMessagesText) {
    const CompletionRequest r = parse_messages_request(
        R"({"max_tokens":4,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],)"
        R"("messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
    ASSERT_EQ(r.messages.size(), 2U);
    EXPECT_EQ(text_of(r.messages[0]), "S");
    EXPECT_EQ(text_of(r.messages[1]), "ab");
}

TEST(MessagesRequest, ToolUseAndToolResultMapOntoToolCallsAndToolMessages) {
    const CompletionRequest r = parse_messages_request(R"({"max_tokens":4,
        "tools":[{"name":"get_weather","description":"Weather.","input_schema":
            {"type":"object","properties":{"city":{"type":"string"}}}}],
        "tool_choice":{"type":"auto"},
        "messages":[
          {"role":"user","content":"Weather in Paris?"},
          {"role":"assistant","content":[{"type":"text","text":"Checking."},
             {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
          {"role":"user","content":[
             {"type":"tool_result","tool_use_id":"toolu_1","content":"21 C"},
             {"type":"tool_result","tool_use_id":"toolu_1","is_error":true,
              "content":[{"type":"text","text":"timeout"}]},
             {"type":"text","text":"And tomorrow?"}]}]})");
    ASSERT_EQ(r.messages.size(), 5U);
    const text::ChatMessage& assistant = r.messages[1];
    EXPECT_EQ(assistant.role, text::Role::Assistant);
    ASSERT_EQ(assistant.tool_calls.size(), 1U);
    EXPECT_EQ(assistant.tool_calls[0].id, "toolu_1");
    EXPECT_EQ(assistant.tool_calls[0].name, "get_weather");
    EXPECT_EQ(assistant.tool_calls[0].arguments, Json::parse(R"({"city":"Paris"})"));
    EXPECT_EQ(text_of(assistant), "Checking.");
    EXPECT_EQ(r.messages[2].role, text::Role::Tool);
    EXPECT_EQ(r.messages[2].tool_call_id, "toolu_1");
    EXPECT_EQ(text_of(r.messages[2]), "21 C");
    EXPECT_EQ(r.messages[3].role, text::Role::Tool);
    EXPECT_EQ(text_of(r.messages[3]), "timeout");
    EXPECT_EQ(r.messages[4].role, text::Role::User);
    ASSERT_EQ(r.tools.tools.size(), 1U);
    EXPECT_TRUE(r.tools.calls_enabled());
    // The template renders the tools in OpenAI's form, as the chat endpoint's would be.
    EXPECT_EQ(r.tools_json[0]["type"], "function");
    EXPECT_EQ(r.tools_json[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
}

TEST(MessagesRequest, ACallOnlyReplyHasNoContent) {
    const CompletionRequest r = parse_messages_request(R"({"max_tokens":4,"messages":[
        {"role":"user","content":"x"},
        {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]})");
    EXPECT_TRUE(std::holds_alternative<std::monostate>(r.messages[1].content));
    EXPECT_EQ(text_of(r.messages[2]), "");
}

TEST(MessagesRequest, ToolChoiceNoneKeepsCallsOff) {
    const CompletionRequest r = parse_messages_request(with(
        R"("tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"})"));
    EXPECT_EQ(r.tools.tools.size(), 1U);
    EXPECT_FALSE(r.tools.calls_enabled());
}

TEST(MessagesRequest, MaxTokensIsRequiredExceptForCounting) {
    EXPECT_NE(
        refusal(R"({"messages":[{"role":"user","content":"hi"}]})").find("max_tokens: is required"),
        std::string::npos);
    const CompletionRequest r = parse_messages_request(
        R"({"messages":[{"role":"user","content":"hi"}]})", {.require_max_tokens = false});
    EXPECT_FALSE(r.max_tokens.has_value());
}

TEST(MessagesRequest, RefusedAndMalformedFieldsNameTheField) {
    const std::pair<std::string, std::string> cases[] = {
        {with(R"("thinking":{"type":"enabled","budget_tokens":1024})"), "thinking"},
        {with(R"("output_config":{"effort":"low"})"), "output_config"},
        {with(R"("mcp_servers":[])"), "mcp_servers"},
        {with(R"("frequency_penalty":1)"), "frequency_penalty: unknown field"},
        {with(R"("temperature":1.5)"), "temperature"},
        {with(R"("top_p":0)"), "top_p"},
        {with(R"("top_k":-1)"), "top_k"},
        {with(R"("max_tokens":0)"), "max_tokens"},
        {with(R"("stream":"yes")"), "stream"},
        {with(R"("stop_sequences":"END")"), "stop_sequences"},
        {with(R"("stop_sequences":[""])"), "stop_sequences[0]"},
        {with(R"("system":[{"type":"image"}])"), "system[0].type"},
        {with(R"("tools":[{"type":"web_search_20250305","name":"web_search"}])"), "tools[0].type"},
        {with(R"("tools":[{"name":"f"}])"), "tools[0].input_schema: is required"},
        {with(R"("tools":[{"name":"bad name","input_schema":{}}])"), "tools[0].name"},
        {with(R"("tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":1}}}])"),
         "tools[0].input_schema.properties.a"},
        {with(R"("tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"})"),
         "tool_choice.type"},
        {with(R"("tool_choice":{"type":"auto","disable_parallel_tool_use":true})"),
         "tool_choice.disable_parallel_tool_use"},
        {R"({"max_tokens":4,"messages":[{"role":"system","content":"x"}]})", "messages[0].role"},
        {R"({"max_tokens":4,"messages":[]})", "messages"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[]}]})", "messages[0].content"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
         "messages[0].content[0].type: image blocks are not supported"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"document"}]}]})",
         "messages[0].content[0].type: document"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"thinking"}]}]})",
         "messages[0].content[0].type: thinking"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text"}]}]})",
         "messages[0].content[0].text: is required"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"a","x":1}]}]})",
         "messages[0].content[0].x: unknown field"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]})",
         "messages[0].content[0].type: tool_use blocks belong in assistant messages"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope"}]}]})",
         "messages[0].content[0].tool_use_id"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]},{"role":"user","content":"b"}]})",
         "messages[1].content[0].input: must be an object"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"The answer is"}]})",
         "messages[1]: a final assistant message (prefill)"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":"a","name":"x"}]})",
         "messages[0].name: unknown field"},
        {R"([1,2])", "the body must be a JSON object"},
        {R"({"max_tokens":4,"messages":[{"role":"user","content":"a"}])", "not valid JSON"},
    };
    for (const auto& [body, expected] : cases) {
        const std::string message = refusal(body);
        EXPECT_NE(message.find(expected), std::string::npos)
            << body << "\n  got: " << message << "\n  expected: " << expected;
    }
}

TEST(MessagesRequest, TooManyStopSequencesAreRefused) {
    std::string list;
    for (size_t i = 0; i <= kMaxStopSequences; ++i)
        list += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
    EXPECT_NE(refusal(with(R"("stop_sequences":[)" + list + "]")).find("stop_sequences"),
              std::string::npos);
}

}  // namespace
}  // namespace cherenkov::serving::anthropic
