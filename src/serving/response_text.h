// What a request's generated tokens become on their way to the client (seed "Tool calling",
// "Limits and tests"): tokens are decoded to text as they come, stop strings cut the text,
// and with tools enabled the incremental tool-call parser takes call markup out of the content.
// Streaming deltas, the JSON response and (later) session history all read the same
// accumulated content, so they always agree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/generate/generator.h"
#include "serving/stop_strings.h"
#include "serving/token_logprobs.h"
#include "text/tokenizer/streaming_detokenizer.h"
#include "text/tool_calls/tool_call_parser.h"

namespace cherenkov::serving {

// New output since the last take().
struct OutputDelta {
    std::string content;
    std::vector<LogprobEntry> logprobs;

    bool empty() const { return content.empty() && logprobs.empty(); }
};

class ResponseText {
public:
    // `tools`: the request's tools when calls are enabled (null: no parsing). `logprobs` asks
    // for each token's log-probability with `top_logprobs` alternatives; the tokens must then
    // come with their logits. `id_seed` makes tool-call ids deterministic per request.
    ResponseText(const text::Tokenizer& tokenizer, std::vector<std::string> stop,
                 const std::vector<text::ToolSpec>* tools, bool logprobs, int top_logprobs,
                 uint64_t id_seed);

    // Adds one generated token. Returns false once a stop string has matched: generation must
    // stop (the token's text past the match is dropped).
    bool push(const engine::EmittedToken& token);
    // Generation ended: releases held-back text and closes the tool-call parser.
    void finish();

    // Content and log-probabilities added since the last take().
    OutputDelta take();

    bool stop_matched() const { return stop_.matched(); }
    // The stop string that ended the text; empty when none did.
    const std::string& stop_sequence() const { return stop_.matched_stop(); }
    const std::string& content() const { return content_; }
    const std::vector<text::ToolCall>& calls() const { return calls_; }
    const std::vector<std::string>& diagnostics() const { return diagnostics_; }
    const std::vector<LogprobEntry>& logprobs() const { return logprobs_; }

private:
    void add_text(const std::string& text);

    text::Tokenizer tokenizer_;
    text::StreamingDetokenizer detokenizer_;
    StopStrings stop_;
    std::optional<text::ToolCallParser> parser_;
    bool logprobs_on_;
    int top_logprobs_;
    int32_t vocab_;

    std::string content_;
    std::vector<text::ToolCall> calls_;
    std::vector<std::string> diagnostics_;
    std::vector<LogprobEntry> logprobs_;
    size_t taken_content_ = 0;
    size_t taken_logprobs_ = 0;
};

}  // namespace cherenkov::serving
