// Sessions and the prefix cache over HTTP with a scripted backend (seed "Sessions", "Prefix
// cache", "Cancellation and commit"): a two-turn session renders exactly the conversation sent
// whole and restores the first turn's checkpoint; tool calls are carried to the next turn as
// structured calls; 404 and 409; a cancelled turn commits nothing and the retry runs from the
// last committed turn; settings inherit and commit; context_tokens limits a turn; a repeated
// prompt is an exact hit that prefills nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "serving/scripted_server.h"

namespace cherenkov::serving {
namespace {

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":
    {"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])";

const char* kCallText =
    "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

text::ChatMessage message(text::Role role, const std::string& content) {
    text::ChatMessage m;
    m.role = role;
    m.content = content;
    return m;
}

Json turn(const std::string& session, const Json& messages, int max_tokens = 50) {
    return {{"session_id", session}, {"messages", messages}, {"max_tokens", max_tokens}};
}

Json user(const std::string& content) {
    return Json::array({{{"role", "user"}, {"content", content}}});
}

// Waits until `done` holds (the server works on other threads).
template <typename F>
bool eventually(F done) {
    for (int i = 0; i < 5000; ++i) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}

TEST(Sessions, TwoTurnsRenderTheConversationSentWholeAndReuseTheFirstTurn) {
    ScriptedServer s("Hash tables map keys to slots.");
    const std::string id = s.post("/v1/sessions", Json::object())["id"];
    const Json first = s.post("/v1/chat/completions", turn(id, user("What is a hash table?")));
    const std::string a = first["choices"][0]["message"]["content"];
    EXPECT_EQ(a, "Hash tables map keys to slots.");
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    const Json second = s.post("/v1/chat/completions", turn(id, user("And collisions?")));
    const std::vector<text::ChatMessage> whole = {
        message(text::Role::User, "What is a hash table?"), message(text::Role::Assistant, a),
        message(text::Role::User, "And collisions?")};
    EXPECT_EQ(s.backend().last_prompt, s.rendered(whole));
    EXPECT_EQ(second["usage"]["prompt_tokens"], s.rendered(whole).size());
    // The first turn's prompt (a message boundary and the complete prompt) was restored.
    EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    // The same conversation sent whole, without a session: the same text, and now every prompt
    // token comes from the cache (an exact hit: nothing is prefilled).
    const int64_t prefilled = s.backend().prefilled_tokens;
    Json messages = Json::array();
    messages.push_back({{"role", "user"}, {"content", "What is a hash table?"}});
    messages.push_back({{"role", "assistant"}, {"content", a}});
    messages.push_back({{"role", "user"}, {"content", "And collisions?"}});
    const Json sent_whole =
        s.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 50}});
    EXPECT_EQ(sent_whole["choices"][0]["message"]["content"],
              second["choices"][0]["message"]["content"]);
    EXPECT_EQ(sent_whole["usage"]["prompt_tokens_details"]["cached_tokens"],
              sent_whole["usage"]["prompt_tokens"]);
    EXPECT_EQ(s.backend().prefilled_tokens, prefilled);

    const Json info = s.get("/v1/sessions/" + id);
    EXPECT_EQ(info["object"], "session");
    EXPECT_EQ(info["turns"], 2);
    EXPECT_EQ(info["messages"], 4);
    EXPECT_GT(info["history_bytes"], 0);
    EXPECT_EQ(info["usage"]["prompt_tokens"], first["usage"]["prompt_tokens"].get<int64_t>() +
                                                  second["usage"]["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(info["usage"]["generated_tokens"],
              first["usage"]["completion_tokens"].get<int64_t>() +
                  second["usage"]["completion_tokens"].get<int64_t>());
    EXPECT_EQ(info["usage"]["cached_tokens"],
              second["usage"]["prompt_tokens_details"]["cached_tokens"]);

    const WorkerCounters counters = s.server().counters();
    EXPECT_GE(counters.prefix_cache.hits, 2U);
    EXPECT_GT(counters.prefix_cache.entries, 0U);
    EXPECT_GT(counters.prefix_cache.bytes, 0U);
    EXPECT_EQ(s.server().session_counters().turns_committed, 2U);
}

TEST(Sessions, ToolCallsAreCarriedToTheNextTurnAsStructuredCalls) {
    ScriptedServerOptions options;
    options.template_file = "tests/data/chat-template-qwen3-coder/Qwen3-Coder.jinja";
    options.http.max_ctx = 2048;  // the template's tools block is long
    ScriptedServer s(kCallText, options);
    const std::string id = s.post("/v1/sessions", Json::object())["id"];
    Json body = turn(id, user("Weather in Paris?"), 200);
    body["tools"] = Json::parse(kTools);
    const Json first = s.post("/v1/chat/completions", body);
    const Json& reply = first["choices"][0]["message"];
    EXPECT_EQ(reply["content"], "Let me check.");
    ASSERT_EQ(reply["tool_calls"].size(), 1U);
    const std::string call_id = reply["tool_calls"][0]["id"];

    Json results =
        Json::array({{{"role", "tool"}, {"tool_call_id", call_id}, {"content", "21 C and sunny"}}});
    body = turn(id, results, 200);
    body["tools"] = Json::parse(kTools);
    s.post("/v1/chat/completions", body);

    // The history holds the call as a structured call with decoded arguments, and the content
    // without the markup: the template renders the markup once, from the call.
    text::ChatMessage assistant = message(text::Role::Assistant, "Let me check.");
    text::MessageToolCall call;
    call.id = call_id;
    call.name = "get_weather";
    call.arguments = nlohmann::ordered_json::parse(R"({"city":"Paris","days":3})");
    assistant.tool_calls.push_back(call);
    text::ChatMessage tool = message(text::Role::Tool, "21 C and sunny");
    tool.tool_call_id = call_id;
    const std::vector<int32_t> expected =
        s.rendered({message(text::Role::User, "Weather in Paris?"), assistant, tool},
                   nlohmann::ordered_json::parse(kTools));
    EXPECT_EQ(s.backend().last_prompt, expected);
    const std::string text = s.tokenizer().decode(s.backend().last_prompt);
    EXPECT_NE(text.find("<function=get_weather>\n<parameter=city>\nParis"), std::string::npos);
    EXPECT_EQ(s.get("/v1/sessions/" + id)["messages"], 4);
}

TEST(Sessions, MissingSessionsAre404AndBusyOnes409) {
    std::string script;
    for (int i = 0; i < 300; ++i) script += "w" + std::to_string(i) + " ";
    ScriptedServer s(script, WorkerOptions{}, std::chrono::milliseconds(3));
    EXPECT_EQ(
        s.post("/v1/chat/completions", turn("session-nope", user("hi")), 404)["error"]["code"],
        "session_not_found");
    EXPECT_EQ(s.get("/v1/sessions/session-nope", 404)["error"]["code"], "session_not_found");
    EXPECT_EQ(s.del("/v1/sessions/session-nope", 404)["error"]["code"], "session_not_found");
    // Sessions apply to chat only.
    s.post("/v1/completions", {{"prompt", "x"}, {"session_id", "s"}}, 400);

    const std::string id = s.post("/v1/sessions", Json::object())["id"];
    Json finish;
    std::thread running([&] {
        httplib::Client c("127.0.0.1", s.server().port());
        c.set_read_timeout(60, 0);
        Json body = turn(id, user("long"), 250);
        body["request_id"] = "long-turn";
        auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
        if (res) finish = Json::parse(res->body)["choices"][0]["finish_reason"];
    });
    ASSERT_TRUE(eventually([&] { return s.server().counters().active == 1; }));
    EXPECT_TRUE(s.get("/v1/sessions/" + id)["busy"].get<bool>());
    EXPECT_EQ(s.post("/v1/chat/completions", turn(id, user("again")), 409)["error"]["code"],
              "session_busy");
    EXPECT_EQ(s.del("/v1/sessions/" + id, 409)["error"]["code"], "session_busy");
    EXPECT_TRUE(s.post("/v1/requests/long-turn/cancel", Json::object())["cancelled"].get<bool>());
    running.join();
    EXPECT_EQ(finish, "cancelled");
    // Free as soon as the response ended: a retry starts at once.
    const Json info = s.get("/v1/sessions/" + id);
    EXPECT_FALSE(info["busy"].get<bool>());
    EXPECT_EQ(info["turns"], 0);
    EXPECT_EQ(s.del("/v1/sessions/" + id)["deleted"], true);
    s.get("/v1/sessions/" + id, 404);
}

TEST(Sessions, ACancelledTurnCommitsNothingAndTheRetryStartsFromTheLastTurn) {
    std::string script;
    for (int i = 0; i < 200; ++i) script += "t" + std::to_string(i) + " ";
    ScriptedServer s(script, WorkerOptions{}, std::chrono::milliseconds(2));
    const std::string id = s.post("/v1/sessions", Json::object())["id"];
    const Json first = s.post("/v1/chat/completions", turn(id, user("one"), 5));
    const Json committed = s.get("/v1/sessions/" + id);
    EXPECT_EQ(committed["turns"], 1);

    // A streamed turn cancelled after its first text.
    std::atomic<bool> saw_text = false;
    std::vector<Json> events;
    std::thread streaming([&] {
        Json body = turn(id, user("two"), 150);
        body["request_id"] = "turn-2";
        body["stream"] = true;
        httplib::Client c("127.0.0.1", s.server().port());
        c.set_read_timeout(60, 0);
        std::string buffer;
        httplib::Request request;
        request.method = "POST";
        request.path = "/v1/chat/completions";
        request.body = body.dump();
        request.set_header("Content-Type", "application/json");
        request.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
            buffer.append(data, n);
            if (buffer.find("\"content\":\"t") != std::string::npos) saw_text = true;
            return true;
        };
        c.send(request);
        size_t at = 0;
        while ((at = buffer.find("data: {", at)) != std::string::npos) {
            const size_t end = buffer.find("\n\n", at);
            events.push_back(Json::parse(buffer.substr(at + 6, end - at - 6)));
            at = end;
        }
    });
    ASSERT_TRUE(eventually([&] { return saw_text.load(); }));
    s.post("/v1/requests/turn-2/cancel", Json::object());
    streaming.join();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "cancelled");
    const Json after = s.get("/v1/sessions/" + id);
    EXPECT_EQ(after["turns"], 1);
    EXPECT_EQ(after["history_bytes"], committed["history_bytes"]);
    EXPECT_EQ(after["usage"], committed["usage"]);

    // The retry renders the committed history plus its own message only.
    const Json retry = s.post("/v1/chat/completions", turn(id, user("two"), 5));
    EXPECT_EQ(retry["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);
    const std::string a = first["choices"][0]["message"]["content"];
    EXPECT_EQ(s.backend().last_prompt,
              s.rendered({message(text::Role::User, "one"), message(text::Role::Assistant, a),
                          message(text::Role::User, "two")}));
    EXPECT_EQ(s.get("/v1/sessions/" + id)["turns"], 2);
}

TEST(Sessions, SettingsInheritCommitAndBoundTheContext) {
    ScriptedServer s("a b c d e f g h");
    EXPECT_EQ(s.post("/v1/sessions", {{"context_tokens", 100000}}, 400)["error"]["param"],
              "context_tokens");
    EXPECT_EQ(s.post("/v1/sessions", {{"frobnicate", 1}}, 400)["error"]["param"], "frobnicate");
    EXPECT_EQ(s.post("/v1/sessions", {{"temperature", "hot"}}, 400)["error"]["param"],
              "temperature");
    const Json created =
        s.post("/v1/sessions",
               {{"temperature", 0.5}, {"top_k", 20}, {"seed", 42}, {"context_tokens", 200}});
    const std::string id = created["id"];
    EXPECT_EQ(created["context_tokens"], 200);
    EXPECT_FLOAT_EQ(created["sampling"]["temperature"].get<float>(), 0.5F);
    EXPECT_EQ(created["sampling"]["seed"], 42);

    Json body = turn(id, user("x"), 3);
    body["top_p"] = 0.9;
    s.post("/v1/chat/completions", body);
    Json info = s.get("/v1/sessions/" + id);
    EXPECT_FLOAT_EQ(info["sampling"]["temperature"].get<float>(), 0.5F);  // inherited
    EXPECT_EQ(info["sampling"]["top_k"], 20);
    EXPECT_FLOAT_EQ(info["sampling"]["top_p"].get<float>(), 0.9F);  // the turn's, committed

    body = turn(id, user("y"), 3);
    body["temperature"] = 0;
    body["seed"] = 7;
    s.post("/v1/chat/completions", body);
    info = s.get("/v1/sessions/" + id);
    EXPECT_FLOAT_EQ(info["sampling"]["temperature"].get<float>(), 0.0F);
    EXPECT_EQ(info["sampling"]["seed"], 7);
    EXPECT_FLOAT_EQ(info["sampling"]["top_p"].get<float>(), 0.9F);

    // context_tokens bounds prompt + output of every turn.
    const Json refused = s.post("/v1/chat/completions", turn(id, user("z"), 190), 400);
    EXPECT_EQ(refused["error"]["code"], "context_length_exceeded");
    EXPECT_NE(refused["error"]["message"].get<std::string>().find("context_tokens"),
              std::string::npos);
    EXPECT_EQ(s.get("/v1/sessions/" + id)["turns"], 2);
}

TEST(PrefixCacheHttp, ARepeatedPromptIsAnExactHitAndOffMeansNone) {
    ScriptedServer s("one two three four");
    const Json body = {{"prompt", "def f(x): return x * 2\n"}, {"max_tokens", 8}};
    const Json first = s.post("/v1/completions", body);
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(first["timings"]["cache_checkpoints_saved"], 1);
    EXPECT_GT(first["timings"]["cache_checkpoint_bytes"], 0);
    const int64_t prefilled = s.backend().prefilled_tokens;
    const Json second = s.post("/v1/completions", body);
    EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"],
              second["usage"]["prompt_tokens"]);
    EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
    EXPECT_EQ(second["timings"]["cache_checkpoints_saved"], 0);
    EXPECT_EQ(second["timings"]["prefill_chunks"], 0);
    EXPECT_EQ(s.backend().prefilled_tokens, prefilled);

    ScriptedServerOptions off;
    off.worker.prefix_cache.max_bytes = 0;
    ScriptedServer uncached("one two three four", off);
    uncached.post("/v1/completions", body);
    const Json again = uncached.post("/v1/completions", body);
    EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(again["choices"][0]["text"], first["choices"][0]["text"]);
    EXPECT_EQ(uncached.server().counters().prefix_cache.entries, 0U);
}

}  // namespace
}  // namespace cherenkov::serving
