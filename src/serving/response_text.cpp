#include "serving/response_text.h"

#include "base/error.h"

namespace cherenkov::serving {

ResponseText::ResponseText(const text::Tokenizer& tokenizer, std::vector<std::string> stop,
                           const std::vector<text::ToolSpec>* tools, bool logprobs,
                           int top_logprobs, uint64_t id_seed)
    : tokenizer_(tokenizer),
      detokenizer_(tokenizer, true),
      stop_(std::move(stop)),
      logprobs_on_(logprobs),
      top_logprobs_(top_logprobs),
      vocab_(static_cast<int32_t>(tokenizer.vocab_size())) {
    if (tools != nullptr) parser_.emplace(*tools, id_seed);
}

void ResponseText::add_text(const std::string& text) {
    if (text.empty()) return;
    if (!parser_) {
        content_ += text;
        return;
    }
    text::ParseDelta delta = parser_->push(text);
    content_ += delta.content;
}

bool ResponseText::push(const engine::EmittedToken& token) {
    if (stop_.matched()) return false;
    if (logprobs_on_) {
        CHERENKOV_ASSERT(!token.logits.empty(), "logprobs need the token's logits");
        logprobs_.push_back(token_logprobs(token.logits, token.token, top_logprobs_));
    }
    // Models pad their vocabulary past the tokenizer's; such ids have no text.
    if (token.token >= vocab_) return true;
    add_text(stop_.push(detokenizer_.push(token.token)));
    return !stop_.matched();
}

void ResponseText::finish() {
    if (!stop_.matched()) add_text(stop_.push(detokenizer_.finish()));
    add_text(stop_.finish());
    if (!parser_) return;
    text::ParseResult result = parser_->finish();
    parser_.reset();
    content_ += result.tail.content;
    calls_ = std::move(result.calls);
    diagnostics_ = std::move(result.diagnostics);
}

OutputDelta ResponseText::take() {
    OutputDelta delta;
    delta.content = content_.substr(taken_content_);
    taken_content_ = content_.size();
    delta.logprobs.assign(logprobs_.begin() + static_cast<std::ptrdiff_t>(taken_logprobs_),
                          logprobs_.end());
    taken_logprobs_ = logprobs_.size();
    return delta;
}

}  // namespace cherenkov::serving
