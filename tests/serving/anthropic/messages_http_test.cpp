// POST /v1/messages end to end over a scripted backend: the same worker, text pipeline and
// tool-call parser as the chat endpoint, answered in Anthropic's shapes (the message object,
// the named stream events in their order, tool_use blocks, stop reasons, usage, error bodies).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "serving/scripted_server.h"

namespace cherenkov::serving {
namespace {

using Json = nlohmann::json;

const char* kCallText =
    "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

Json tools() {
    return Json::parse(R"([{"name":"get_weather","description":"Weather.","input_schema":
        {"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}])");
}

Json ask(int max_tokens = 200) {
    return {{"model", "claude-test"},
            {"max_tokens", max_tokens},
            {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}}};
}

struct Reply {
    int status = 0;
    std::string body;
    std::string content_type;
};

Reply post(ScriptedServer& s, const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", s.server().port());
    c.set_read_timeout(60, 0);
    const httplib::Headers headers = {{"x-api-key", "anything"},
                                      {"anthropic-version", "2023-06-01"}};
    auto res = c.Post(path.c_str(), headers, body, "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    return {res->status, res->body, res->get_header_value("Content-Type")};
}

// (event name, data) of each server-sent event.
std::vector<std::pair<std::string, Json>> events_of(const std::string& body) {
    std::vector<std::pair<std::string, Json>> out;
    size_t at = 0;
    while ((at = body.find("event: ", at)) != std::string::npos) {
        const size_t name_end = body.find('\n', at);
        const std::string name = body.substr(at + 7, name_end - at - 7);
        const size_t data = body.find("data: ", name_end);
        const size_t end = body.find("\n\n", data);
        out.emplace_back(name, Json::parse(body.substr(data + 6, end - data - 6)));
        at = end;
    }
    return out;
}

std::vector<std::pair<std::string, Json>> stream(ScriptedServer& s, Json body) {
    body["stream"] = true;
    const Reply r = post(s, "/v1/messages", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.content_type.starts_with("text/event-stream"));
    return events_of(r.body);
}

TEST(MessagesHttp, TextMessage) {
    ScriptedServer s("Hello there.");
    const Reply r = post(s, "/v1/messages", ask().dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json m = Json::parse(r.body);
    EXPECT_TRUE(m["id"].get<std::string>().starts_with("msg_"));
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_EQ(m["model"], "claude-test");
    ASSERT_EQ(m["content"].size(), 1U);
    EXPECT_EQ(m["content"][0], Json({{"type", "text"}, {"text", "Hello there."}}));
    EXPECT_EQ(m["stop_reason"], "end_turn");
    EXPECT_TRUE(m["stop_sequence"].is_null());
    const auto n_out = static_cast<int64_t>(s.tokenizer().encode("Hello there.", true).size());
    EXPECT_GE(m["usage"]["output_tokens"], n_out);  // the text's tokens, and EOS
    EXPECT_GT(m["usage"]["input_tokens"], 0);
    EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 0);
}

TEST(MessagesHttp, MaxTokensAndStopSequence) {
    ScriptedServer s("alpha beta gamma delta");
    Json body = ask(2);
    EXPECT_EQ(Json::parse(post(s, "/v1/messages", body.dump()).body)["stop_reason"], "max_tokens");
    body = ask(50);
    body["stop_sequences"] = {"never", "ta ga", "gamma"};
    const Json m = Json::parse(post(s, "/v1/messages", body.dump()).body);
    EXPECT_EQ(m["content"][0]["text"], "alpha be");
    EXPECT_EQ(m["stop_reason"], "stop_sequence");
    EXPECT_EQ(m["stop_sequence"], "ta ga");
    std::string text;
    Json last_delta;
    for (const auto& [name, data] : stream(s, body)) {
        if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
        if (name == "message_delta") last_delta = data;
    }
    EXPECT_EQ(text, "alpha be");
    EXPECT_EQ(last_delta["delta"]["stop_reason"], "stop_sequence");
    EXPECT_EQ(last_delta["delta"]["stop_sequence"], "ta ga");
}

TEST(MessagesHttp, StreamEventsComeInAnthropicsOrder) {
    ScriptedServer s("Hello there, streaming world.");
    const auto events = stream(s, ask());
    ASSERT_GE(events.size(), 7U);
    EXPECT_EQ(events[0].first, "message_start");
    EXPECT_EQ(events[0].second["message"]["content"], Json::array());
    EXPECT_TRUE(events[0].second["message"]["stop_reason"].is_null());
    EXPECT_EQ(events[1].first, "ping");
    EXPECT_EQ(events[2].first, "content_block_start");
    EXPECT_EQ(events[2].second["content_block"], Json({{"type", "text"}, {"text", ""}}));
    std::string text;
    size_t i = 3;
    for (; i < events.size() && events[i].first == "content_block_delta"; ++i) {
        EXPECT_EQ(events[i].second["index"], 0);
        EXPECT_EQ(events[i].second["delta"]["type"], "text_delta");
        text += events[i].second["delta"]["text"].get<std::string>();
    }
    EXPECT_EQ(text, "Hello there, streaming world.");
    ASSERT_EQ(i + 3, events.size());
    EXPECT_EQ(events[i].first, "content_block_stop");
    EXPECT_EQ(events[i + 1].first, "message_delta");
    EXPECT_EQ(events[i + 1].second["delta"]["stop_reason"], "end_turn");
    EXPECT_GT(events[i + 1].second["usage"]["output_tokens"], 0);
    EXPECT_EQ(events[i + 2].first, "message_stop");
    for (const auto& [name, data] : events) EXPECT_EQ(data["type"], name);
}

TEST(MessagesHttp, ToolUseInJsonAndStream) {
    ScriptedServer s(kCallText);
    Json body = ask();
    body["tools"] = tools();
    const Json m = Json::parse(post(s, "/v1/messages", body.dump()).body);
    ASSERT_EQ(m["content"].size(), 2U) << m.dump();
    EXPECT_EQ(m["content"][0]["text"], "Let me check.");
    const Json& use = m["content"][1];
    EXPECT_EQ(use["type"], "tool_use");
    EXPECT_TRUE(use["id"].get<std::string>().starts_with("toolu_"));
    EXPECT_EQ(use["name"], "get_weather");
    EXPECT_EQ(use["input"], Json::parse(R"({"city":"Paris","days":3})"));
    EXPECT_EQ(m["stop_reason"], "tool_use");

    std::string text;
    std::string json_input;
    int tool_starts = 0;
    std::string stop_reason;
    for (const auto& [name, data] : stream(s, body)) {
        if (name == "content_block_start" && data["content_block"]["type"] == "tool_use") {
            ++tool_starts;
            EXPECT_EQ(data["index"], 1);
            EXPECT_TRUE(data["content_block"]["id"].get<std::string>().starts_with("toolu_"));
            EXPECT_EQ(data["content_block"]["input"], Json::object());
        }
        if (name == "content_block_delta" && data["delta"]["type"] == "text_delta") {
            text += data["delta"]["text"].get<std::string>();
        }
        if (name == "content_block_delta" && data["delta"]["type"] == "input_json_delta") {
            json_input += data["delta"]["partial_json"].get<std::string>();
        }
        if (name == "message_delta") stop_reason = data["delta"]["stop_reason"];
    }
    EXPECT_EQ(text, "Let me check.");  // markup never in text
    EXPECT_EQ(tool_starts, 1);
    EXPECT_EQ(Json::parse(json_input), use["input"]);
    EXPECT_EQ(stop_reason, "tool_use");
}

TEST(MessagesHttp, ACallOnlyReplyHasOnlyTheToolUseBlock) {
    ScriptedServer s(std::string(kCallText).substr(std::string("Let me check.\n").size()));
    Json body = ask();
    body["tools"] = tools();
    const Json m = Json::parse(post(s, "/v1/messages", body.dump()).body);
    ASSERT_EQ(m["content"].size(), 1U);
    EXPECT_EQ(m["content"][0]["type"], "tool_use");
    for (const auto& [name, data] : stream(s, body)) {
        if (name == "content_block_start") {
            EXPECT_EQ(data["content_block"]["type"], "tool_use");
        }
    }
}

TEST(MessagesHttp, TheToolRoundTripRendersTheSamePromptAsTheChatEndpoint) {
    ScriptedServerOptions options;
    options.template_file = "tests/data/chat-template-qwen3-coder/Qwen3-Coder.jinja";
    ScriptedServer s("Sunny.", options);
    const Json anthropic = Json::parse(R"({"max_tokens":8,"system":"Be brief.",
        "tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
        "messages":[{"role":"user","content":"Weather in Paris?"},
          {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"21 C"}]}]})");
    const Json openai = Json::parse(R"({"max_tokens":8,
        "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
        "messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
          {"role":"tool","tool_call_id":"toolu_1","content":"21 C"}]})");
    const Json m = Json::parse(post(s, "/v1/messages", anthropic.dump()).body);
    const Json c = s.post("/v1/chat/completions", openai);
    EXPECT_EQ(m["usage"]["input_tokens"].get<int64_t>() +
                  m["usage"]["cache_read_input_tokens"].get<int64_t>(),
              c["usage"]["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(m["content"][0]["text"], c["choices"][0]["message"]["content"]);
    Json count = anthropic;
    count.erase("max_tokens");
    const Reply counted = post(s, "/v1/messages/count_tokens", count.dump());
    ASSERT_EQ(counted.status, 200) << counted.body;
    EXPECT_EQ(Json::parse(counted.body)["input_tokens"], c["usage"]["prompt_tokens"]);
}

TEST(MessagesHttp, ErrorsHaveAnthropicsShape) {
    ScriptedServer s("x");
    const auto error_of = [&](const std::string& path, const std::string& body, int status) {
        const Reply r = post(s, path, body);
        EXPECT_EQ(r.status, status) << body << " -> " << r.body;
        const Json e = Json::parse(r.body);
        EXPECT_EQ(e["type"], "error") << r.body;
        return e["error"];
    };
    Json e = error_of("/v1/messages", R"({"messages":[{"role":"user","content":"hi"}]})", 400);
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_NE(e["message"].get<std::string>().find("max_tokens"), std::string::npos);
    e = error_of(
        "/v1/messages",
        R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
        400);
    EXPECT_NE(e["message"].get<std::string>().find("messages[0].content[0].type"),
              std::string::npos);
    e = error_of("/v1/messages", "{not json", 400);
    EXPECT_EQ(e["type"], "invalid_request_error");
    e = error_of("/v1/messages",
                 R"({"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]})", 400);
    EXPECT_NE(e["message"].get<std::string>().find("max_tokens"), std::string::npos);
    e = error_of("/v1/messages/nothing", "{}", 404);
    EXPECT_EQ(e["type"], "not_found_error");
    // The OpenAI routes keep OpenAI's shape.
    const Reply openai = post(s, "/v1/chat/completions", "{not json");
    EXPECT_EQ(openai.status, 400);
    EXPECT_TRUE(Json::parse(openai.body)["error"].contains("param"));
}

}  // namespace
}  // namespace cherenkov::serving
