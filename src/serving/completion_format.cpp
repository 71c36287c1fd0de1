#include "serving/completion_format.h"

namespace cherenkov::serving {
namespace {

using Json = nlohmann::json;

bool chat(const ResponseContext& c) {
    return c.endpoint == Endpoint::Chat;
}

std::string token_string(const ResponseContext& c, int32_t token) {
    const auto bytes = c.tokenizer != nullptr ? c.tokenizer->token_bytes(token) : std::nullopt;
    return bytes ? std::string(*bytes) : std::string();
}

Json byte_list(const std::string& s) {
    Json out = Json::array();
    for (const char ch : s) out.push_back(static_cast<unsigned char>(ch));
    return out;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
Json chat_logprobs(const ResponseContext& c, const std::vector<LogprobEntry>& entries) {
    Json content = Json::array();
    for (const LogprobEntry& e : entries) {
        const std::string token = token_string(c, e.chosen.token);
        Json top = Json::array();
        for (const TokenLogprob& alt : e.top) {
            const std::string alt_token = token_string(c, alt.token);
            top.push_back(
                {{"token", alt_token}, {"logprob", alt.logprob}, {"bytes", byte_list(alt_token)}});
        }
        content.push_back({{"token", token},
                           {"logprob", e.chosen.logprob},
                           {"bytes", byte_list(token)},
                           {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
}

// Legacy completions: parallel lists, top alternatives as {token: logprob} objects.
Json completion_logprobs(const ResponseContext& c, const std::vector<LogprobEntry>& entries,
                         int64_t first_offset) {
    Json tokens = Json::array();
    Json token_logprobs = Json::array();
    Json top_logprobs = Json::array();
    Json offsets = Json::array();
    int64_t offset = first_offset;
    for (const LogprobEntry& e : entries) {
        const std::string token = token_string(c, e.chosen.token);
        tokens.push_back(token);
        token_logprobs.push_back(e.chosen.logprob);
        Json top = Json::object();
        for (const TokenLogprob& alt : e.top) top[token_string(c, alt.token)] = alt.logprob;
        top_logprobs.push_back(top);
        offsets.push_back(offset);
        offset += static_cast<int64_t>(token.size());
    }
    return {{"tokens", tokens},
            {"token_logprobs", token_logprobs},
            {"top_logprobs", top_logprobs},
            {"text_offset", offsets}};
}

Json logprobs_json(const ResponseContext& c, const std::vector<LogprobEntry>& entries) {
    if (!c.logprobs) return nullptr;
    return chat(c) ? chat_logprobs(c, entries) : completion_logprobs(c, entries, 0);
}

Json envelope(const ResponseContext& c, const char* object) {
    return {{"id", c.id}, {"object", object}, {"created", c.created}, {"model", c.model}};
}

Json chunk(const ResponseContext& c, Json choice) {
    Json out = envelope(c, chat(c) ? "chat.completion.chunk" : "text_completion");
    out["choices"] = Json::array({std::move(choice)});
    if (c.include_usage) out["usage"] = nullptr;
    return out;
}

Json timings_json(const Timings& t) {
    return {{"queued_seconds", t.queued_seconds},
            {"prefill_seconds", t.prefill_seconds},
            {"decode_seconds", t.decode_seconds},
            {"prefill_chunks", t.prefill_chunks},
            {"decode_steps", t.decode_steps},
            {"drafts_proposed", t.drafts_proposed},
            {"drafts_accepted", t.drafts_accepted},
            {"cache_restore_seconds", t.cache_restore_seconds},
            {"cache_save_seconds", t.cache_save_seconds},
            {"cache_checkpoints_saved", t.cache_checkpoints_saved},
            {"cache_checkpoint_bytes", t.cache_checkpoint_bytes}};
}

Json tool_calls_json(const std::vector<text::ToolCall>& calls, bool indexed) {
    Json out = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        Json call = text::tool_call_to_json(calls[i]);
        if (indexed) call["index"] = i;
        out.push_back(std::move(call));
    }
    return out;
}

}  // namespace

std::string sse_event(const nlohmann::json& payload) {
    return "data: " + payload.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

Json usage_json(const Usage& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json opening_chunk(const ResponseContext& c) {
    return chunk(c, {{"index", 0},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}});
}

Json delta_chunk(const ResponseContext& c, const OutputDelta& delta) {
    if (chat(c)) {
        Json d = Json::object();
        if (!delta.content.empty()) d["content"] = delta.content;
        return chunk(c, {{"index", 0},
                         {"delta", d},
                         {"logprobs", logprobs_json(c, delta.logprobs)},
                         {"finish_reason", nullptr}});
    }
    return chunk(c, {{"index", 0},
                     {"text", delta.content},
                     {"logprobs", logprobs_json(c, delta.logprobs)},
                     {"finish_reason", nullptr}});
}

std::vector<Json> closing_chunks(const ResponseContext& c, const Frame& final) {
    std::vector<Json> out;
    // Content the final step released (held-back text, the parser's tail) comes first.
    if (!final.delta.empty()) out.push_back(delta_chunk(c, final.delta));
    if (chat(c) && !final.calls.empty()) {
        out.push_back(chunk(c, {{"index", 0},
                                {"delta", {{"tool_calls", tool_calls_json(final.calls, true)}}},
                                {"logprobs", nullptr},
                                {"finish_reason", nullptr}}));
    }
    Json last = chat(c) ? Json{{"index", 0},
                               {"delta", Json::object()},
                               {"logprobs", nullptr},
                               {"finish_reason", final.finish_reason}}
                        : Json{{"index", 0},
                               {"text", ""},
                               {"logprobs", nullptr},
                               {"finish_reason", final.finish_reason}};
    Json closing = chunk(c, std::move(last));
    closing["timings"] = timings_json(final.timings);
    out.push_back(std::move(closing));
    if (c.include_usage) {
        Json usage = envelope(c, chat(c) ? "chat.completion.chunk" : "text_completion");
        usage["choices"] = Json::array();
        usage["usage"] = usage_json(final.usage);
        out.push_back(std::move(usage));
    }
    return out;
}

Json full_response(const ResponseContext& c, const Frame& final) {
    Json choice = {{"index", 0}};
    if (chat(c)) {
        Json message = {{"role", "assistant"}};
        // A call-only message has no content (seed "Tool calling").
        message["content"] =
            final.content.empty() && !final.calls.empty() ? Json(nullptr) : Json(final.content);
        if (!final.calls.empty()) message["tool_calls"] = tool_calls_json(final.calls, false);
        message["refusal"] = nullptr;
        choice["message"] = std::move(message);
    } else {
        choice["text"] = final.content;
    }
    choice["logprobs"] = logprobs_json(c, final.logprobs);
    choice["finish_reason"] = final.finish_reason;
    Json out = envelope(c, chat(c) ? "chat.completion" : "text_completion");
    out["choices"] = Json::array({std::move(choice)});
    out["usage"] = usage_json(final.usage);
    out["timings"] = timings_json(final.timings);
    return out;
}

}  // namespace cherenkov::serving
