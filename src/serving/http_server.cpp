#include "serving/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "engine/generate/context_budget.h"
#include "serving/anthropic/messages_format.h"
#include "serving/anthropic/messages_request.h"
#include "serving/completion_format.h"
#include "serving/completion_reply.h"
#include "serving/completion_request.h"
#include "serving/prometheus_metrics.h"
#include "serving/prompt.h"
#include "serving/session_api.h"
#include "serving/web_assets.h"

namespace cherenkov::serving {
namespace {

using Json = nlohmann::json;

void send_json(httplib::Response& res, int status, const Json& body) {
    res.status = status;
    res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
    send_json(res, error.status(), error.body());
}

// The APIs that generate text: each parses its body into a CompletionRequest and answers in its
// own wire format (a ReplyFormat); everything between is shared.
enum class Api { Chat, Completion, Messages };

// Anthropic's routes answer errors in Anthropic's shape, whoever finds the error.
bool anthropic_route(const httplib::Request& req) {
    return req.path == "/v1/messages" || req.path.rfind("/v1/messages/", 0) == 0;
}

Json error_body(Api api, const ApiError& error) {
    return api == Api::Messages ? anthropic::error_json(error) : error.body();
}

void send_error(httplib::Response& res, Api api, const ApiError& error) {
    send_json(res, error.status(), error_body(api, error));
}

Api route_api(const httplib::Request& req) {
    return anthropic_route(req) ? Api::Messages : Api::Chat;
}

// The error body for a status httplib set itself (unknown route, body too large, ...).
ApiError status_error(int status) {
    switch (status) {
        case 404: return ApiError(404, "unknown route", "not_found_error");
        case 405: return ApiError(405, "method not allowed", "invalid_request_error");
        case 411:
            return ApiError(411,
                            "the request needs a Content-Length header (chunked bodies are "
                            "not supported)",
                            "invalid_request_error");
        case 413: return ApiError(413, "the request body is too large", "invalid_request_error");
        case 414: return ApiError(414, "the request URI is too long", "invalid_request_error");
        default:
            if (status >= 500) return ApiError(status, "internal server error", "server_error");
            return ApiError(status, "bad request", "invalid_request_error");
    }
}

// The reply a successful turn adds to its session: the content and the parsed calls, with their
// arguments as decoded objects and no markup (seed "Tool calling": a call-only message has null
// content).
text::ChatMessage assistant_message(const Frame& final) {
    text::ChatMessage m;
    m.role = text::Role::Assistant;
    if (!final.content.empty() || final.calls.empty()) m.content = final.content;
    for (const text::ToolCall& call : final.calls) {
        text::MessageToolCall c;
        c.id = call.id;
        c.name = call.name;
        if (call.argument_values.is_object()) c.arguments = call.argument_values;
        m.tool_calls.push_back(std::move(c));
    }
    return m;
}

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

struct HttpServer::Impl {
    HttpOptions options;
    httplib::Server server;
    std::thread listener;
    int bound_port = 0;

    std::atomic<bool> ready{false};
    std::optional<ServedModel> served;  // set once before `ready`
    SessionStore sessions;
    std::unique_ptr<Worker> worker;
    std::atomic<bool> stopped{false};
    StatsBoard stats;

    mutable std::mutex registry_mutex;
    std::map<std::string, std::shared_ptr<RequestChannel>> registry;
    std::mt19937_64 id_rng{std::random_device{}()};

    explicit Impl(HttpOptions o) : options(std::move(o)), sessions(options.sessions) {}

    // Registers `wanted` (or a new id when empty); throws ApiError 409 for a registered one.
    std::shared_ptr<RequestChannel> register_request(const std::string& wanted) {
        std::lock_guard lock(registry_mutex);
        std::string id = wanted;
        if (id.empty()) {
            do {
                char buf[32];
                std::snprintf(buf, sizeof buf, "req-%016llx",
                              static_cast<unsigned long long>(id_rng()));
                id = buf;
            } while (registry.count(id) != 0);
        } else if (registry.count(id) != 0) {
            throw ApiError(409, "request_id '" + id + "' is already in use by a registered request",
                           "invalid_request_error", "request_id", "duplicate_request_id");
        }
        auto channel = std::make_shared<RequestChannel>(id);
        registry.emplace(id, channel);
        return channel;
    }

    // Releases `channel`'s id, unless a newer request registered that id since.
    void unregister(const std::shared_ptr<RequestChannel>& channel) {
        std::lock_guard lock(registry_mutex);
        const auto it = registry.find(channel->id());
        if (it != registry.end() && it->second == channel) registry.erase(it);
    }

    std::unique_ptr<Job> build_job(const CompletionRequest& request,
                                   std::shared_ptr<RequestChannel> channel,
                                   std::shared_ptr<SessionTurn> turn) {
        auto job = std::make_unique<Job>();
        job->channel = std::move(channel);
        // A session turn renders the committed history followed by its new messages.
        std::vector<text::ChatMessage> conversation;
        if (turn) {
            conversation = turn->base().history;
            conversation.insert(conversation.end(), request.messages.begin(),
                                request.messages.end());
        }
        PromptTokens prompt =
            prompt_tokens(request, turn ? conversation : request.messages, *served);
        job->prompt = std::move(prompt.tokens);
        job->boundaries = std::move(prompt.boundaries);
        job->stream = request.stream;
        engine::GenerationOptions& g = job->generation;
        // Omitted fields inherit the session's committed settings (seed "Sessions").
        g.sampling =
            request.sampling.over(turn ? turn->base().sampling : request.defaults.sampling);
        try {
            engine::validate_sampling_options(g.sampling);
        } catch (const Error& e) {
            throw ApiError(400, e.what(), "invalid_request_error");
        }
        g.drafts = served->drafts;
        const bool speculate =
            g.drafts > 0 && served->model->has_mtp() && g.sampling.allows_speculation();
        // Prompt + output + draft headroom must fit the server's context, or the session's
        // context_tokens (seed "Sessions").
        engine::ContextRequest context;
        context.prompt_tokens = static_cast<int64_t>(job->prompt.size());
        context.drafts = speculate ? g.drafts : 0;
        context.max_ctx = turn ? turn->base().context_tokens : options.max_ctx;
        // Without max_tokens: the configured default, cut to what the context leaves (a default
        // is no reason to refuse a request), or all of that room.
        const int64_t room = context.max_ctx - context.prompt_tokens - context.drafts;
        context.max_tokens = request.max_tokens.value_or(
            request.defaults.max_tokens > 0 ? std::min(request.defaults.max_tokens, room) : room);
        try {
            engine::check_context_budget(context,
                                         {.max_tokens = "max_tokens",
                                          .drafts = "--drafts",
                                          .max_ctx = turn ? "the session's context_tokens"
                                                          : "the server's context (--max-ctx)"});
        } catch (const Error& e) {
            throw ApiError(400, e.what(), "invalid_request_error",
                           request.max_tokens ? "max_tokens" : "", "context_length_exceeded");
        }
        const int64_t max_tokens = context.max_tokens;
        g.max_tokens = max_tokens;
        g.max_ctx = engine::needed_context(context);
        g.stop_at_eos = request.defaults.stop_at_eos;  // the EOS policy is the server's
        g.eos_ids = served->eos_ids;
        g.prefill_quantum = served->prefill_quantum;
        g.token_logits = request.logprobs;
        if (turn) {
            // The session's stream continues unless the turn gives a seed, which restarts it.
            if (!request.sampling.seed) g.rng = turn->base().rng;
            turn->new_messages = request.messages;
            turn->sampling = g.sampling;
            job->turn = std::move(turn);
        }
        const std::vector<text::ToolSpec>* tools =
            request.endpoint == Endpoint::Chat && request.tools.calls_enabled()
                ? &request.tools.tools
                : nullptr;
        job->text = std::make_unique<ResponseText>(served->tokenizer, request.stop, tools,
                                                   request.logprobs, request.top_logprobs,
                                                   std::hash<std::string>{}(job->channel->id()));
        return job;
    }

    // Right before the final response (seed "Cancellation and commit"): the writer atomically
    // chooses completion or cancellation, and only completion commits a session turn's history,
    // settings, random stream and usage. A cancel that came first turns the response into a
    // cancelled one.
    static void settle(Frame& final, RequestChannel& channel, SessionTurn* turn) {
        if (!final.error && final.finish_reason != "cancelled" && !channel.publish()) {
            final.finish_reason = "cancelled";
        }
        if (turn == nullptr) return;
        if (final.error || final.finish_reason == "cancelled" || !final.rng) {
            turn->discard();
            return;
        }
        TurnCommit commit;
        commit.messages = turn->new_messages;
        commit.messages.push_back(assistant_message(final));
        commit.sampling = turn->sampling;
        commit.rng = *final.rng;
        commit.usage.prompt_tokens = final.usage.prompt_tokens;
        commit.usage.cached_tokens = final.usage.cached_tokens;
        commit.usage.generated_tokens = final.usage.completion_tokens;
        commit.usage.prefill_seconds = final.timings.prefill_seconds;
        commit.usage.decode_seconds = final.timings.decode_seconds;
        try {
            turn->commit(std::move(commit));
        } catch (const ApiError& e) {
            final.error = e;
            final.finish_reason.clear();
        }
    }

    // `defaults`: the server's generation defaults when the request arrived (kept to its end).
    static CompletionRequest parse_request(Api api, const std::string& body,
                                           const config::GenerationDefaults& defaults) {
        switch (api) {
            case Api::Chat: return parse_completion_request(body, Endpoint::Chat, defaults);
            case Api::Completion:
                return parse_completion_request(body, Endpoint::Completion, defaults);
            case Api::Messages: {
                CompletionRequest request = anthropic::parse_messages_request(body);
                request.defaults = defaults;
                return request;
            }
        }
        throw ApiError(500, "unknown API", "server_error");
    }

    std::unique_ptr<ReplyFormat> make_reply(Api api, const CompletionRequest& request,
                                            const std::string& request_id,
                                            int64_t prompt_tokens) const {
        const std::string model = request.model.empty() ? served->names.front() : request.model;
        if (api == Api::Messages) {
            return std::make_unique<anthropic::MessagesReply>(
                anthropic::MessagesContext{"msg_" + request_id, model, prompt_tokens});
        }
        ResponseContext context;
        context.endpoint = request.endpoint;
        context.id = (request.endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + request_id;
        context.model = model;
        context.created = unix_seconds();
        context.tokenizer = &served->tokenizer;
        context.logprobs = request.logprobs;
        context.include_usage = request.include_usage;
        return std::make_unique<CompletionReply>(std::move(context));
    }

    void handle_generation(const httplib::Request& req, httplib::Response& res, Api api) {
        if (!ready.load(std::memory_order_acquire)) {
            send_error(res, api,
                       ApiError(503, "the model is loading", "server_error", "", "loading"));
            return;
        }
        std::shared_ptr<RequestChannel> channel;
        try {
            const CompletionRequest request = parse_request(api, req.body, served->defaults());
            // A missing session is 404, a busy one 409, before the request id is taken.
            std::shared_ptr<SessionTurn> turn;
            if (!request.session_id.empty()) {
                const auto now = SessionStore::Clock::now();
                turn = std::make_shared<SessionTurn>(sessions, request.session_id,
                                                     sessions.begin_turn(request.session_id, now));
            }
            channel = register_request(request.request_id);
            res.set_header("X-Request-ID", channel->id());
            channel->set_on_cancel([this] {
                if (worker) worker->poke();
            });
            std::unique_ptr<Job> job = build_job(request, channel, turn);
            std::unique_ptr<ReplyFormat> reply =
                make_reply(api, request, channel->id(), static_cast<int64_t>(job->prompt.size()));
            worker->submit(std::move(job));
            std::optional<ApiError> rejection;
            if (channel->wait_admission(&rejection) == Admission::Rejected) {
                unregister(channel);
                send_error(res, api, *rejection);
                return;
            }
            if (request.stream) {
                stream(res, std::move(channel), std::move(reply), std::move(turn));
                return;
            }
            for (;;) {
                std::optional<Frame> frame = channel->next_frame(std::chrono::milliseconds(500));
                if (!frame || !frame->final) continue;
                settle(*frame, *channel, turn.get());
                unregister(channel);
                if (frame->error) {
                    send_json(res, frame->error->status(), reply->error_body(*frame->error));
                } else {
                    send_json(res, 200, reply->response(*frame));
                }
                return;
            }
        } catch (const ApiError& e) {
            if (channel) unregister(channel);
            send_error(res, api, e);
        } catch (const std::exception& e) {
            if (channel) unregister(channel);
            log_error("serve", std::string("request failed: ") + e.what());
            send_error(res, api, ApiError(500, e.what(), "server_error"));
        }
    }

    // Server-sent events in the request's wire format: the opening events, one piece per frame,
    // then the closing (or error) events. A failed write (the client went away, or stayed blocked
    // past the write timeout) cancels the request.
    void stream(httplib::Response& res, std::shared_ptr<RequestChannel> channel,
                std::unique_ptr<ReplyFormat> reply, std::shared_ptr<SessionTurn> turn) {
        res.set_header("Cache-Control", "no-cache");
        struct State {
            Impl* server;
            std::shared_ptr<RequestChannel> channel;
            std::unique_ptr<ReplyFormat> reply;
            std::shared_ptr<SessionTurn> turn;
            bool opened = false;
        };
        auto state = std::make_shared<State>(
            State{this, std::move(channel), std::move(reply), std::move(turn)});
        res.set_chunked_content_provider(
            "text/event-stream",
            [state](size_t /*offset*/, httplib::DataSink& sink) {
                const auto write = [&](const std::string& text) {
                    if (text.empty() || sink.write(text.data(), text.size())) return true;
                    state->channel->cancel();
                    return false;
                };
                if (!state->opened) {
                    state->opened = true;
                    if (!write(state->reply->stream_open())) return false;
                }
                std::optional<Frame> frame =
                    state->channel->next_frame(std::chrono::milliseconds(250));
                if (!frame) {
                    return write(state->reply->stream_idle(std::chrono::steady_clock::now()));
                }
                if (!frame->final) return write(state->reply->stream_delta(frame->delta));
                settle(*frame, *state->channel, state->turn.get());
                state->turn.reset();
                // The id is free once the client can see the end (the releaser repeats this).
                state->server->unregister(state->channel);
                if (!write(frame->error ? state->reply->stream_error(*frame->error)
                                        : state->reply->stream_close(*frame))) {
                    return false;
                }
                sink.done();
                return true;
            },
            [this, state](bool /*success*/) {
                // Also after a failed write: the worker ends the request as cancelled, and the
                // turn (if it never reached its end) is discarded.
                state->channel->cancel();
                state->turn.reset();
                unregister(state->channel);
            });
    }

    // POST /v1/messages/count_tokens: the prompt's token count for a Messages body, as the
    // chat template renders it (tools included); nothing is generated.
    void handle_count_tokens(const httplib::Request& req, httplib::Response& res) {
        if (!ready.load(std::memory_order_acquire)) {
            send_error(res, Api::Messages,
                       ApiError(503, "the model is loading", "server_error", "", "loading"));
            return;
        }
        try {
            const CompletionRequest request =
                anthropic::parse_messages_request(req.body, {.require_max_tokens = false});
            const PromptTokens prompt = prompt_tokens(request, request.messages, *served);
            send_json(res, 200, {{"input_tokens", prompt.tokens.size()}});
        } catch (const ApiError& e) {
            send_error(res, Api::Messages, e);
        }
    }

    void handle_cancel(const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        std::shared_ptr<RequestChannel> channel;
        {
            std::lock_guard lock(registry_mutex);
            if (const auto it = registry.find(id); it != registry.end()) channel = it->second;
        }
        if (!channel) {
            send_error(res, ApiError(404, "no registered request has id '" + id + "'",
                                     "not_found_error", "request_id", "request_not_found"));
            return;
        }
        // False once the final response was published: cancellation cannot undo it.
        const bool cancelled = channel->cancel();
        send_json(res, 200, {{"id", id}, {"object", "request.cancel"}, {"cancelled", cancelled}});
    }

    bool require_ready(httplib::Response& res) {
        if (ready.load(std::memory_order_acquire)) return true;
        send_error(res, ApiError(503, "the model is loading", "server_error", "", "loading"));
        return false;
    }

    // POST /v1/sessions: a session with the body's settings over the server's defaults.
    void handle_create_session(const httplib::Request& req, httplib::Response& res) {
        if (!require_ready(res)) return;
        try {
            const config::GenerationDefaults defaults = served->defaults();
            const SessionRequest request = parse_session_request(req.body, options.max_ctx);
            engine::SamplingOptions sampling = request.sampling.over(defaults.sampling);
            try {
                engine::validate_sampling_options(sampling);
            } catch (const Error& e) {
                throw ApiError(400, e.what(), "invalid_request_error");
            }
            const SessionInfo info =
                sessions.create(sampling, request.context_tokens.value_or(options.max_ctx),
                                SessionStore::Clock::now());
            send_json(res, 200, session_json(info));
        } catch (const ApiError& e) {
            send_error(res, e);
        }
    }

    void handle_get_session(const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        const std::optional<SessionInfo> info = sessions.find(id, SessionStore::Clock::now());
        if (!info) {
            send_error(res, ApiError(404, "no session has id '" + id + "'", "not_found_error",
                                     "session_id", "session_not_found"));
            return;
        }
        send_json(res, 200, session_json(*info));
    }

    void handle_delete_session(const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        try {
            sessions.remove(id, SessionStore::Clock::now());
            send_json(res, 200, {{"id", id}, {"object", "session.deleted"}, {"deleted", true}});
        } catch (const ApiError& e) {
            send_error(res, e);
        }
    }

    Json model_entry(const std::string& id) const {
        return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "cherenkov"}};
    }

    void routes() {
        server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
            // Bodies must come with their length: chunked uploads are refused before any read.
            if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
                !req.has_header("Content-Length")) {
                send_error(res, route_api(req), status_error(411));
                return httplib::Server::HandlerResponse::Handled;
            }
            return httplib::Server::HandlerResponse::Unhandled;
        });
        server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
            if (res.body.empty()) send_error(res, route_api(req), status_error(res.status));
        });
        server.set_exception_handler(
            [](const httplib::Request& req, httplib::Response& res, const std::exception_ptr& ep) {
                std::string what = "internal error";
                try {
                    if (ep) std::rethrow_exception(ep);
                } catch (const std::exception& e) {
                    what = e.what();
                } catch (...) {
                }
                send_error(res, route_api(req), ApiError(500, what, "server_error"));
            });
        server.Post("/v1/chat/completions",
                    [this](const httplib::Request& req, httplib::Response& res) {
                        handle_generation(req, res, Api::Chat);
                    });
        server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
            handle_generation(req, res, Api::Completion);
        });
        server.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
            handle_generation(req, res, Api::Messages);
        });
        server.Post("/v1/messages/count_tokens",
                    [this](const httplib::Request& req, httplib::Response& res) {
                        handle_count_tokens(req, res);
                    });
        server.Post("/v1/sessions", [this](const httplib::Request& req, httplib::Response& res) {
            handle_create_session(req, res);
        });
        server.Get(R"(/v1/sessions/([^/]+))",
                   [this](const httplib::Request& req, httplib::Response& res) {
                       handle_get_session(req, res);
                   });
        server.Delete(R"(/v1/sessions/([^/]+))",
                      [this](const httplib::Request& req, httplib::Response& res) {
                          handle_delete_session(req, res);
                      });
        server.Post(R"(/v1/requests/([^/]+)/cancel)",
                    [this](const httplib::Request& req, httplib::Response& res) {
                        handle_cancel(req, res);
                    });
        server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            Json data = Json::array();
            if (ready.load(std::memory_order_acquire)) {
                for (const std::string& name : served->names) data.push_back(model_entry(name));
            } else {
                data.push_back(model_entry("cherenkov"));
            }
            send_json(res, 200, {{"object", "list"}, {"data", data}});
        });
        server.Get(R"(/v1/models/([^/]+))", [this](const httplib::Request& req,
                                                   httplib::Response& res) {
            const std::string id = req.matches[1];
            const bool known =
                id == "cherenkov" ||
                (ready.load(std::memory_order_acquire) &&
                 std::find(served->names.begin(), served->names.end(), id) != served->names.end());
            if (!known) {
                send_error(res, ApiError(404, "the model '" + id + "' does not exist",
                                         "invalid_request_error", "model", "model_not_found"));
                return;
            }
            send_json(res, 200, model_entry(id));
        });
        // Prometheus text format 0.0.4 (docs/monitoring.md); served while loading too.
        server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            MetricsInput input;
            input.ready = ready.load(std::memory_order_acquire);
            const std::shared_ptr<const engine::EngineStats> latest = stats.latest();
            input.engine = latest.get();
            if (input.ready && worker) {
                input.worker = worker->counters();
                input.requests = worker->request_totals();
            }
            input.sessions = sessions.counters();
            res.status = 200;
            res.set_content(render_prometheus_metrics(input), "text/plain; version=0.0.4");
        });
        // The chat page (src/serving/web/), served from the binary, also while the model loads.
        const auto serve_asset = [this](const std::string& path, const WebAsset& asset) {
            server.Get(path, [&asset](const httplib::Request&, httplib::Response& res) {
                res.set_header("Cache-Control", "no-cache");
                res.set_header("X-Content-Type-Options", "nosniff");
                res.set_header("Content-Security-Policy",
                               "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                               "frame-ancestors 'none'");
                res.set_content(std::string(asset.bytes), std::string(asset.content_type));
            });
        };
        for (const WebAsset& asset : web_assets()) serve_asset(std::string(asset.path), asset);
        if (const WebAsset* index = find_web_asset("/")) serve_asset("/", *index);
        server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
            if (ready.load(std::memory_order_acquire)) {
                send_json(res, 200, {{"status", "ok"}});
            } else {
                send_json(res, 503, {{"status", "loading"}});
            }
        });
    }
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::start() {
    Impl& s = *impl_;
    s.routes();
    s.server.set_payload_max_length(s.options.max_body_bytes);
    s.server.set_write_timeout(s.options.write_timeout);
    s.server.set_read_timeout(std::chrono::seconds(30));
    // Each streaming response holds a thread for its duration.
    s.server.new_task_queue = [] { return new httplib::ThreadPool(64); };
    if (s.options.port == 0) {
        s.bound_port = s.server.bind_to_any_port(s.options.host);
        if (s.bound_port <= 0) throw_io("cannot listen on " + s.options.host + " (any port)");
    } else {
        if (!s.server.bind_to_port(s.options.host, s.options.port)) {
            throw_io("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                     " (in use, or not an address of this machine)");
        }
        s.bound_port = s.options.port;
    }
    s.listener = std::thread([&s] { s.server.listen_after_bind(); });
}

int HttpServer::port() const {
    return impl_->bound_port;
}

void HttpServer::set_ready(ServedModel model, WorkerOptions worker) {
    Impl& s = *impl_;
    s.served.emplace(std::move(model));
    // Idle sessions expire about once a second while the worker has nothing to run (and at
    // every session access).
    worker.idle_tick = [&s] { s.sessions.expire(SessionStore::Clock::now()); };
    s.worker = std::make_unique<Worker>(*s.served->model, std::move(worker));
    s.ready.store(true, std::memory_order_release);
}

void HttpServer::stop() {
    Impl& s = *impl_;
    if (s.stopped.exchange(true)) return;
    // The worker ends every request (final frames); the writers then finish their responses.
    if (s.worker) s.worker->stop();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (registered_requests() > 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    s.server.stop();
    if (s.listener.joinable()) s.listener.join();
    s.ready.store(false, std::memory_order_release);
    s.worker.reset();
}

WorkerCounters HttpServer::counters() const {
    return impl_->worker ? impl_->worker->counters() : WorkerCounters{};
}

SessionCounters HttpServer::session_counters() const {
    return impl_->sessions.counters();
}

RequestTotals HttpServer::request_totals() const {
    return impl_->worker ? impl_->worker->request_totals() : RequestTotals{};
}

bool HttpServer::ready() const {
    return impl_->ready.load(std::memory_order_acquire);
}

StatsBoard& HttpServer::stats_board() {
    return impl_->stats;
}

size_t HttpServer::registered_requests() const {
    std::lock_guard lock(impl_->registry_mutex);
    return impl_->registry.size();
}

}  // namespace cherenkov::serving
