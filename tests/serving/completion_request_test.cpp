// The request parser and validator: accepted fields land where the worker reads them, refused and
// malformed ones are 400s naming the field.
#include "serving/completion_request.h"

#include <gtest/gtest.h>

#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

CompletionRequest chat(const std::string& body) {
    return parse_completion_request(body, Endpoint::Chat);
}

// The param of the 400 `body` gets.
std::string refusal(const std::string& body, Endpoint endpoint = Endpoint::Chat) {
    try {
        parse_completion_request(body, endpoint);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return e.body()["error"]["param"].is_null() ? ""
                                                    : e.body()["error"]["param"].get<std::string>();
    }
    ADD_FAILURE() << "accepted: " << body;
    return "<accepted>";
}

constexpr const char* kUser = R"("messages":[{"role":"user","content":"hi"}])";

std::string with(const std::string& fields) {
    return std::string("{") + kUser + "," + fields + "}";
}

TEST(CompletionRequest, ChatFieldsAreRead) {
    const CompletionRequest r = chat(with(
        R"("model":"m","max_completion_tokens":9,"temperature":0.5,"top_p":0.9,"top_k":-1,)"
        R"("presence_penalty":0.1,"frequency_penalty":-0.2,"repetition_penalty":1.1,"seed":-1,)"
        R"("stop":"END","stream":true,"stream_options":{"include_usage":true},"logprobs":true,)"
        R"("top_logprobs":4,"request_id":"a-b_c","user":"u","metadata":{},"store":false)"));
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.max_tokens, 9);
    EXPECT_FLOAT_EQ(*r.sampling.temperature, 0.5F);
    EXPECT_EQ(*r.sampling.top_k, 0);  // -1: off
    EXPECT_EQ(*r.sampling.seed, ~uint64_t{0});
    EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
    EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
    EXPECT_EQ(r.top_logprobs, 4);
    EXPECT_EQ(r.request_id, "a-b_c");
    ASSERT_EQ(r.messages.size(), 1U);
    const engine::SamplingOptions s = r.sampling.over(engine::SamplingOptions{});
    EXPECT_FLOAT_EQ(s.top_p, 0.9F);
    EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1F);
}

TEST(CompletionRequest, MaxTokensWinsOverMaxCompletionTokensAndNullIsAbsent) {
    EXPECT_EQ(chat(with(R"("max_tokens":3,"max_completion_tokens":9)")).max_tokens, 3);
    EXPECT_FALSE(chat(with(R"("max_tokens":null,"temperature":null)")).max_tokens.has_value());
    EXPECT_EQ(chat(with(R"("max_tokens":4.0)")).max_tokens, 4);
}

TEST(CompletionRequest, CompletionPromptForms) {
    const auto parse = [](const std::string& prompt) {
        return parse_completion_request(R"({"prompt":)" + prompt + "}", Endpoint::Completion);
    };
    EXPECT_EQ(parse(R"("abc")").prompt, "abc");
    EXPECT_EQ(parse(R"(["abc"])").prompt, "abc");
    EXPECT_EQ(*parse("[1,2,3]").prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(*parse("[[4,5]]").prompt_tokens, (std::vector<int32_t>{4, 5}));
    const CompletionRequest r = parse_completion_request(
        R"({"prompt":"x","logprobs":2,"echo":false,"best_of":1})", Endpoint::Completion);
    EXPECT_TRUE(r.logprobs);
    EXPECT_EQ(r.top_logprobs, 2);
    EXPECT_EQ(refusal(R"({"prompt":["a","b"]})", Endpoint::Completion), "prompt");
    EXPECT_EQ(refusal(R"({"prompt":[]})", Endpoint::Completion), "prompt");
    EXPECT_EQ(refusal(R"({"prompt":[-1]})", Endpoint::Completion), "prompt[0]");
    EXPECT_EQ(refusal(R"({"prompt":"x","echo":true})", Endpoint::Completion), "echo");
    EXPECT_EQ(refusal(R"({"prompt":"x","suffix":"y"})", Endpoint::Completion), "suffix");
    EXPECT_EQ(refusal(R"({"messages":[]})", Endpoint::Completion), "messages");
    EXPECT_EQ(refusal(R"({"max_tokens":3})", Endpoint::Completion), "prompt");
}

TEST(CompletionRequest, RefusalsNameTheField) {
    EXPECT_EQ(refusal(with(R"("n":2)")), "n");
    EXPECT_EQ(refusal(with(R"("response_format":{"type":"json_object"})")), "response_format");
    EXPECT_EQ(refusal(with(R"("reasoning_effort":"low")")), "reasoning_effort");
    EXPECT_EQ(refusal(with(R"("chat_template_kwargs":{})")), "chat_template_kwargs");
    EXPECT_EQ(refusal(with(R"("whatever":1)")), "whatever");
    EXPECT_EQ(refusal(with(R"("temperature":2.5)")), "temperature");
    EXPECT_EQ(refusal(with(R"("top_p":0)")), "top_p");
    EXPECT_EQ(refusal(with(R"("top_k":1.5)")), "top_k");
    EXPECT_EQ(refusal(with(R"("max_tokens":0)")), "max_tokens");
    EXPECT_EQ(refusal(with(R"("max_tokens":"5")")), "max_tokens");
    EXPECT_EQ(refusal(with(R"("stop":["a","b","c","d","e"])")), "stop");
    EXPECT_EQ(refusal(with(R"("stop":[""])")), "stop[0]");
    EXPECT_EQ(refusal(with(R"("stop":5)")), "stop");
    EXPECT_EQ(refusal(with(R"("stream_options":{"include_usage":true})")), "stream_options");
    EXPECT_EQ(refusal(with(R"("top_logprobs":2)")), "top_logprobs");
    EXPECT_EQ(refusal(with(R"("logprobs":true,"top_logprobs":21)")), "top_logprobs");
    EXPECT_EQ(refusal(with(R"("request_id":"has space")")), "request_id");
    EXPECT_EQ(
        refusal(with(
            R"("tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}])")),
        "tools");
    EXPECT_EQ(refusal(with(R"("session_id":"")")), "session_id");
    EXPECT_EQ(refusal(with(R"("session_id":5)")), "session_id");
    EXPECT_EQ(refusal(R"({"prompt":"x","session_id":"s"})", Endpoint::Completion), "session_id");
    EXPECT_EQ(refusal(R"({"messages":[{"role":"bot","content":"x"}]})"), "messages");
    EXPECT_EQ(
        refusal(
            R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]})"),
        "messages");
    EXPECT_EQ(refusal(R"({"messages":[]})"), "messages");
}

// A session turn sends only its new messages: they are checked with the session's history when
// the prompt is rendered, so a turn of tool results alone (no user message) parses.
TEST(CompletionRequest, SessionTurnsCarryTheirNewMessagesOnly) {
    const CompletionRequest r = chat(
        R"({"session_id":"session-1","messages":[{"role":"tool","tool_call_id":"c1","content":"21 C"}]})");
    EXPECT_EQ(r.session_id, "session-1");
    ASSERT_EQ(r.messages.size(), 1U);
    EXPECT_EQ(r.messages[0].role, text::Role::Tool);
    EXPECT_EQ(refusal(R"({"messages":[{"role":"tool","tool_call_id":"c1","content":"21 C"}]})"),
              "messages");
}

TEST(CompletionRequest, MalformedBodies) {
    EXPECT_EQ(refusal(""), "");
    EXPECT_EQ(refusal("{"), "");
    EXPECT_EQ(refusal("[]"), "");
    EXPECT_EQ(refusal("\"x\""), "");
    EXPECT_EQ(refusal(std::string(1000, '[')), "");  // deeper than the nesting limit
    EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":"a"}]} trailing)"), "");
    // A number too large for any integer field.
    EXPECT_EQ(refusal(with(R"("max_tokens":99999999999999999999)")), "max_tokens");
    EXPECT_EQ(refusal(with(R"("seed":18446744073709551615)")), "seed");
}

TEST(CompletionRequest, RequestIds) {
    EXPECT_TRUE(valid_request_id("a"));
    EXPECT_TRUE(valid_request_id(std::string(80, 'x')));
    EXPECT_FALSE(valid_request_id(""));
    EXPECT_FALSE(valid_request_id(std::string(81, 'x')));
    EXPECT_FALSE(valid_request_id("a.b"));
}

}  // namespace
}  // namespace cherenkov::serving
