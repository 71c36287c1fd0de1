// The server end to end over HTTP with a scripted backend: tool-call markup the model "writes"
// goes through the same worker, text pipeline and response formats as real output, so the
// seed's tool-calling promises are checked on the wire (content before calls kept, markup never in
// content, one indexed tool_calls delta before the final chunk, content null for call-only
// messages, finish reasons tool_calls vs length), and two requests interleave with parking.
#include "serving/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serving/scripted_server.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::serving {
namespace {

using Json = nlohmann::json;

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":
    {"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";

const char* kCallText =
    "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

Json chat_with_tools(int max_tokens = 200) {
    return {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
            {"tools", Json::parse(kTools)},
            {"max_tokens", max_tokens}};
}

TEST(HttpServer, ToolCallsInTheJsonResponse) {
    ScriptedServer s(kCallText);
    const Json r = s.post("/v1/chat/completions", chat_with_tools());
    const Json& message = r["choices"][0]["message"];
    EXPECT_EQ(message["content"], "Let me check.");
    ASSERT_EQ(message["tool_calls"].size(), 1U);
    const Json& call = message["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
              Json::parse(R"({"city":"Paris","days":3})"));
    EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
}

TEST(HttpServer, ToolCallsInTheStream) {
    ScriptedServer s(kCallText);
    const std::vector<Json> events = s.stream("/v1/chat/completions", chat_with_tools());
    std::string content;
    int call_deltas = 0;
    size_t finish_at = 0;
    size_t calls_at = 0;
    for (size_t i = 0; i < events.size(); ++i) {
        const Json& delta = events[i]["choices"][0]["delta"];
        if (delta.contains("content")) content += delta["content"].get<std::string>();
        if (delta.contains("tool_calls")) {
            ++call_deltas;
            calls_at = i;
            EXPECT_EQ(delta["tool_calls"][0]["index"], 0);
            EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "get_weather");
        }
        if (!events[i]["choices"][0]["finish_reason"].is_null()) finish_at = i;
    }
    EXPECT_EQ(content, "Let me check.");  // markup never in content
    EXPECT_EQ(call_deltas, 1);
    EXPECT_LT(calls_at, finish_at);
    EXPECT_EQ(events[finish_at]["choices"][0]["finish_reason"], "tool_calls");
}

TEST(HttpServer, CallOnlyMessageHasNullContent) {
    ScriptedServer s(std::string(kCallText).substr(std::string("Let me check.\n").size()));
    const Json r = s.post("/v1/chat/completions", chat_with_tools());
    EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
    EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1U);
    const std::vector<Json> events = s.stream("/v1/chat/completions", chat_with_tools());
    for (const Json& e : events) {
        const Json& delta = e["choices"][0]["delta"];
        if (delta.contains("content")) {
            EXPECT_EQ(delta["content"], "");
        }
    }
}

TEST(HttpServer, ATokenBudgetCutoffKeepsLength) {
    // The budget ends right after the calls, before the model's EOS: recovered calls, "length".
    ScriptedServer s(kCallText);
    const auto n = static_cast<int>(s.tokenizer().encode(kCallText, true).size());
    const Json r = s.post("/v1/chat/completions", chat_with_tools(n));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1U);
    EXPECT_EQ(r["usage"]["completion_tokens"], n);
}

TEST(HttpServer, UnparsableMarkupIsReturnedAsContent) {
    const std::string broken = "Hi <tool_call>\n<oops>not a call</oops>";
    ScriptedServer s(broken);
    const Json r = s.post("/v1/chat/completions", chat_with_tools());
    EXPECT_EQ(r["choices"][0]["message"]["content"], broken);
    EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(HttpServer, WithoutToolsMarkupIsPlainContent) {
    ScriptedServer s(kCallText);
    Json body = chat_with_tools();
    body.erase("tools");
    EXPECT_EQ(s.post("/v1/chat/completions", body)["choices"][0]["message"]["content"], kCallText);
    body["tools"] = Json::parse(kTools);
    body["tool_choice"] = "none";
    EXPECT_EQ(s.post("/v1/chat/completions", body)["choices"][0]["message"]["content"], kCallText);
}

TEST(HttpServer, StopStringsAcrossTokensInJsonAndStream) {
    ScriptedServer s("alpha beta gamma delta");
    Json body = {{"prompt", "x"}, {"max_tokens", 50}, {"stop", {"ta ga", "never"}}};
    const Json r = s.post("/v1/completions", body);
    EXPECT_EQ(r["choices"][0]["text"], "alpha be");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    std::string text;
    std::string finish;
    for (const Json& e : s.stream("/v1/completions", body)) {
        text += e["choices"][0]["text"].get<std::string>();
        if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, "alpha be");
    EXPECT_EQ(finish, "stop");
}

TEST(HttpServer, InterleavedRequestsSwitchStatesAndEachGetsItsScript) {
    std::string script;
    for (int i = 0; i < 60; ++i) script += "word" + std::to_string(i) + " ";
    // One set of caches for two requests: every switch parks one. Slow enough that the two
    // requests overlap.
    WorkerOptions worker;
    worker.cache_sets = 1;
    ScriptedServer s(script, worker, std::chrono::milliseconds(2));
    Json results[2];
    std::thread threads[2];
    for (int i = 0; i < 2; ++i) {
        threads[i] = std::thread([&, i] {
            httplib::Client c("127.0.0.1", s.server().port());
            c.set_read_timeout(60, 0);
            const Json body = {{"prompt", i == 0 ? "first prompt" : "a second, longer prompt here"},
                               {"max_tokens", 60}};
            auto res = c.Post("/v1/completions", body.dump(), "application/json");
            if (res) results[i] = Json::parse(res->body);
        });
    }
    for (auto& t : threads) t.join();
    for (const Json& r : results) {
        ASSERT_TRUE(r.contains("choices")) << r.dump();
        EXPECT_EQ(r["choices"][0]["text"].get<std::string>().substr(0, 40), script.substr(0, 40));
    }
    EXPECT_GT(s.server().counters().switches, 0U);
    EXPECT_EQ(s.server().registered_requests(), 0U);
}

TEST(HttpServer, CapacityAndAdmission) {
    WorkerOptions worker;
    worker.max_active = 1;
    worker.max_queued = 0;
    std::string script;
    for (int i = 0; i < 400; ++i) script += "x ";
    ScriptedServer s(script, worker, std::chrono::milliseconds(5));
    std::thread first([&] {
        httplib::Client c("127.0.0.1", s.server().port());
        c.set_read_timeout(60, 0);
        auto res =
            c.Post("/v1/completions", R"({"prompt":"p","max_tokens":400,"request_id":"busy"})",
                   "application/json");
        ASSERT_TRUE(res);
        EXPECT_EQ(Json::parse(res->body)["choices"][0]["finish_reason"], "cancelled") << res->body;
    });
    // Wait until the first request runs, then the queue (0) is full.
    for (int i = 0; i < 5000 && s.server().counters().active == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Json r = s.post("/v1/completions", {{"prompt", "q"}, {"max_tokens", 2}}, 503);
    EXPECT_EQ(r["error"]["code"], "capacity_exhausted");
    s.post("/v1/requests/busy/cancel", Json::object());
    first.join();
    EXPECT_EQ(s.post("/v1/requests/busy/cancel", Json::object(), 404)["error"]["code"],
              "request_not_found");
}

}  // namespace
}  // namespace cherenkov::serving
