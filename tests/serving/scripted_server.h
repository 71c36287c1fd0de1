// Test support: the whole server (HTTP, worker, prefix cache, sessions) on a free port over a
// ScriptedBackend that writes a fixed script, with the tiny-python tokenizer and its chat
// template (or another template), and a client for JSON, streams and plain status checks.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "serving/http_server.h"
#include "serving/scripted_backend.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::serving {

using Json = nlohmann::json;

inline const std::string kModelDir = std::string(CHERENKOV_SOURCE_DIR) + "/models/tiny-python";

struct ScriptedServerOptions {
    WorkerOptions worker;
    std::chrono::milliseconds delay{0};  // per forward call
    HttpOptions http = defaults();
    // A template file to use instead of the model's (relative to the source tree).
    std::string template_file;

    static HttpOptions defaults() {
        HttpOptions o;
        o.port = 0;
        o.max_ctx = 512;
        return o;
    }
};

// A server on a free port whose backend writes `script`.
class ScriptedServer {
public:
    explicit ScriptedServer(const std::string& script, WorkerOptions worker = {},
                            std::chrono::milliseconds delay = std::chrono::milliseconds(0))
        : ScriptedServer(script, with(std::move(worker), delay)) {}

    ScriptedServer(const std::string& script, ScriptedServerOptions options)
        : tokenizer_(text::Tokenizer::load_directory(kModelDir)),
          backend_(tokenizer_.encode(script, true), *tokenizer_.eos_token_id(),
                   static_cast<int64_t>(tokenizer_.vocab_size())),
          server_(options.http) {
        backend_.delay = options.delay;
        server_.start();
        ServedModel served(backend_, tokenizer_);
        if (options.template_file.empty()) {
            chat_template_ = text::ChatTemplate::load_directory(kModelDir);
        } else {
            const std::string path =
                std::string(CHERENKOV_SOURCE_DIR) + "/" + options.template_file;
            chat_template_ = text::ChatTemplate::from_source(read_text_file(path), path);
        }
        served.chat_template = chat_template_;
        served.eos_ids = {*tokenizer_.eos_token_id()};
        served.names = {"cherenkov"};
        served.drafts = 0;
        server_.set_ready(std::move(served), std::move(options.worker));
        client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
        client_->set_read_timeout(60, 0);
    }

    static ScriptedServerOptions with(WorkerOptions worker, std::chrono::milliseconds delay) {
        ScriptedServerOptions o;
        o.worker = std::move(worker);
        o.delay = delay;
        return o;
    }

    Json post(const std::string& path, const Json& body, int expect = 200) {
        auto res = client_->Post(path.c_str(), body.dump(), "application/json");
        EXPECT_TRUE(res) << path;
        if (!res) return {};
        EXPECT_EQ(res->status, expect) << res->body;
        return Json::parse(res->body);
    }

    Json get(const std::string& path, int expect = 200) {
        auto res = client_->Get(path.c_str());
        EXPECT_TRUE(res) << path;
        if (!res) return {};
        EXPECT_EQ(res->status, expect) << res->body;
        return Json::parse(res->body);
    }

    Json del(const std::string& path, int expect = 200) {
        auto res = client_->Delete(path.c_str());
        EXPECT_TRUE(res) << path;
        if (!res) return {};
        EXPECT_EQ(res->status, expect) << res->body;
        return Json::parse(res->body);
    }

    // The JSON payloads of a stream's events, up to [DONE] (not included).
    std::vector<Json> stream(const std::string& path, Json body) {
        body["stream"] = true;
        auto res = client_->Post(path.c_str(), body.dump(), "application/json");
        EXPECT_TRUE(res);
        std::vector<Json> events;
        if (!res) return events;
        EXPECT_EQ(res->status, 200) << res->body;
        size_t at = 0;
        bool done = false;
        while ((at = res->body.find("data: ", at)) != std::string::npos) {
            const size_t end = res->body.find("\n\n", at);
            const std::string payload = res->body.substr(at + 6, end - at - 6);
            at = end;
            if (payload == "[DONE]") {
                done = true;
                break;
            }
            events.push_back(Json::parse(payload));
        }
        EXPECT_TRUE(done);
        return events;
    }

    // The tokens the template makes of `messages` (as the server renders a chat prompt).
    std::vector<int32_t> rendered(const std::vector<text::ChatMessage>& messages,
                                  const nlohmann::ordered_json& tools = nullptr) const {
        text::RenderOptions render;
        render.add_generation_prompt = true;
        render.enable_thinking = false;
        return tokenizer_.encode(chat_template_->render(messages, tools, render), true);
    }

    HttpServer& server() { return server_; }
    testing::ScriptedBackend& backend() { return backend_; }
    const text::Tokenizer& tokenizer() const { return tokenizer_; }

private:
    text::Tokenizer tokenizer_;
    testing::ScriptedBackend backend_;
    std::optional<text::ChatTemplate> chat_template_;
    HttpServer server_;
    std::unique_ptr<httplib::Client> client_;
};

}  // namespace cherenkov::serving
