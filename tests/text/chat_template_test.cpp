// ChatTemplate and parse_messages: loading from a model directory (chat_template.jinja, then
// tokenizer_config.json), the variables the template sees, conversation rules, and
// JSON-pointer error paths. Byte-for-byte agreement with Jinja2/transformers over the real
// templates is checked by tests/text/test_chat_templates.py.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace cherenkov::text {
namespace {

using Json = nlohmann::ordered_json;

std::string error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

class ModelDir {
public:
    ModelDir() {
        path_ = std::filesystem::temp_directory_path() /
                ("cherenkov_chat_template_test_" + std::to_string(::getpid()) + "_" +
                 std::to_string(counter_++));
        std::filesystem::create_directories(path_);
    }
    ~ModelDir() { std::filesystem::remove_all(path_); }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path_ / name, std::ios::binary) << text;
    }
    std::string path() const { return path_.string(); }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

std::vector<ChatMessage> messages(const std::string& json) {
    return parse_messages(Json::parse(json));
}

TEST(ChatTemplate, PrefersChatTemplateJinjaOverTokenizerConfig) {
    ModelDir dir;
    dir.write("chat_template.jinja", "file:{{ messages[0].content }}{{ eos_token }}");
    dir.write("tokenizer_config.json",
              R"({"chat_template": "config", "eos_token": "<|im_end|>", "bos_token": null})");
    auto chat = ChatTemplate::load_directory(dir.path());
    EXPECT_EQ(chat.render(messages(R"([{"role": "user", "content": "hi"}])"), Json()),
              "file:hi<|im_end|>");
    EXPECT_FALSE(chat.special_tokens().bos_token.has_value());
}

TEST(ChatTemplate, FallsBackToNamedDefaultInTokenizerConfig) {
    ModelDir dir;
    dir.write(
        "tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}],
                  "bos_token": {"content": "<s>", "lstrip": false}})");
    auto chat = ChatTemplate::load_directory(dir.path());
    EXPECT_EQ(chat.render(messages(R"([{"role": "user", "content": "x"}])"), Json()), "D<s>");
}

TEST(ChatTemplate, MissingTemplateIsNotFound) {
    ModelDir dir;
    dir.write("tokenizer_config.json", R"({"eos_token": "x"})");
    EXPECT_NE(error_of([&] { ChatTemplate::load_directory(dir.path()); }).find("no chat_template"),
              std::string::npos);
}

TEST(ChatTemplate, SuppliesTheVariablesTransformersDoes) {
    auto chat = ChatTemplate::from_source(
        "{{ add_generation_prompt }} {{ enable_thinking }} {{ tools is defined }} {{ "
        "messages|length }}",
        "t");
    auto conversation = messages(R"([{"role": "user", "content": "x"}])");
    EXPECT_EQ(chat.render(conversation, Json()), "True False False 1");
    RenderOptions options;
    options.add_generation_prompt = false;
    options.enable_thinking = true;
    EXPECT_EQ(
        chat.render(conversation,
                    Json::parse(R"([{"type": "function", "function": {"name": "f"}}])"), options),
        "False True True 1");
    EXPECT_EQ(chat.render(conversation, Json::array()), "True False False 1");
}

TEST(ChatTemplate, MessagesAsTheTemplateSeesThem) {
    auto chat = ChatTemplate::from_source(
        "{% for m in messages %}{{ m.role }}|{{ m.content is defined }}|{{ "
        "m.tool_calls|default([])|tojson }}|"
        "{{ m.reasoning_content }}|{{ m.tool_call_id }}\n{% endfor %}",
        "t");
    auto conversation = messages(R"([
        {"role": "developer", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "reasoning_content": "why",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": [1, 2.5]}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}])");
    EXPECT_EQ(
        chat.render(conversation, Json()),
        "system|True|[]||\n"
        "user|True|[]||\n"
        "assistant|False|[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
        "\"arguments\": {\"x\": [1, 2.5]}}}]|why|\n"
        "tool|True|[]||c1\n");
}

TEST(ChatTemplate, ConversationRules) {
    auto chat = ChatTemplate::from_source("x", "t");
    EXPECT_EQ(
        error_of([&] {
            chat.render(
                messages(
                    R"([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])"),
                Json());
        }),
        "messages/1: a system (or developer) message may only come first");
    EXPECT_EQ(
        error_of([&] { chat.render(messages(R"([{"role": "system", "content": "a"}])"), Json()); }),
        "messages: the conversation must contain a user message");
    EXPECT_EQ(error_of([&] {
                  chat.render(messages(R"([{"role": "user", "content": "a"}])"), Json::object());
              }),
              "tools: must be a list, not object");
}

TEST(ChatTemplate, TemplateErrorsPassThrough) {
    auto chat = ChatTemplate::from_source(
        "{{ raise_exception('Only user and assistant roles are supported!') }}", "t");
    EXPECT_EQ(
        error_of([&] { chat.render(messages(R"([{"role": "user", "content": "a"}])"), Json()); }),
        "Only user and assistant roles are supported!");
    auto broken = ChatTemplate::from_source("\n{{ messages[0].content.nope() }}", "tpl.jinja");
    EXPECT_EQ(
        error_of([&] { broken.render(messages(R"([{"role": "user", "content": "a"}])"), Json()); }),
        "tpl.jinja:2:28: 'str object' has no attribute 'nope'");
}

TEST(ChatTemplate, RendersTheQwen3TemplateFromTestData) {
    auto chat = ChatTemplate::load_directory(std::string(CHERENKOV_SOURCE_DIR) +
                                             "/tests/data/tokenizer-qwen2-qwen3");
    std::string prompt = chat.render(
        messages(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])"),
        Json());
    // The template's own text for these messages (Qwen3 appends an empty think block when
    // enable_thinking is false).
    EXPECT_EQ(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        "<think>\n\n</think>\n\n");
}

TEST(ParseMessages, ErrorsCarryJsonPaths) {
    EXPECT_EQ(error_of([] { messages(R"([{"role": "user", "content": "a"}, {"role": "bot"}])"); }),
              "messages/1/role: unknown role 'bot' (expected system, developer, user, assistant or "
              "tool)");
    EXPECT_EQ(error_of([] { messages(R"([{"content": "a"}])"); }), "messages/0/role: missing");
    EXPECT_EQ(error_of([] { messages(R"([{"role": "user", "content": 5}])"); }),
              "messages/0/content: must be a string, null or a list of content parts, not number");
    EXPECT_EQ(
        error_of([] { messages(R"([{"role": "user", "content": [{"type": "image_url"}]}])"); }),
        "messages/0/content/0/type: unsupported content part type 'image_url' (only text)");
    EXPECT_EQ(
        error_of([] {
            messages(
                R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}])");
        }).rfind("messages/0/tool_calls/0/function/arguments: not valid JSON", 0),
        0u);
    EXPECT_EQ(
        error_of([] {
            messages(
                R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}])");
        }),
        "messages/0/tool_calls/0/function/arguments: must be a JSON object (or a string holding "
        "one), not array");
    EXPECT_EQ(error_of([] {
                  messages(R"([{"role": "user", "tool_calls": [{"function": {"name": "f"}}]}])");
              }),
              "messages/0/tool_calls: only assistant messages carry tool calls");
    EXPECT_EQ(error_of([] { messages(R"([{"role": "user", "content": "a", "colour": "red"}])"); }),
              "messages/0/colour: unknown key");
    EXPECT_EQ(error_of([] { messages(R"({"role": "user"})"); }),
              "messages: must be a list, not object");
}

TEST(ParseMessages, AcceptsOpenAiShapes) {
    auto parsed = messages(R"([
        {"role": "developer", "content": "d"},
        {"role": "user", "content": "u", "name": "ann"},
        {"role": "assistant", "content": null, "refusal": null, "reasoning": "r",
         "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "t", "tool_call_id": "1"}])");
    ASSERT_EQ(parsed.size(), 4u);
    EXPECT_EQ(parsed[0].role, Role::System);
    EXPECT_EQ(parsed[1].name, "ann");
    EXPECT_TRUE(std::holds_alternative<std::monostate>(parsed[2].content));
    EXPECT_EQ(parsed[2].reasoning_content, "r");
    EXPECT_EQ(parsed[2].tool_calls[0].arguments, Json::parse(R"({"a": 1})"));
    EXPECT_EQ(parsed[3].tool_call_id, "1");
}

}  // namespace
}  // namespace cherenkov::text
