// OpenAI's wire format as a ReplyFormat (completion_format.h has the JSON shapes): chat and text
// completions, streamed as `data: {json}` events closed by `data: [DONE]`.
#pragma once

#include "serving/completion_format.h"
#include "serving/reply_format.h"

namespace cherenkov::serving {

class CompletionReply : public ReplyFormat {
public:
    explicit CompletionReply(ResponseContext context) : context_(std::move(context)) {}

    nlohmann::json error_body(const ApiError& error) const override { return error.body(); }
    nlohmann::json response(const Frame& final) const override;
    std::string stream_open() override;
    std::string stream_delta(const OutputDelta& delta) override;
    std::string stream_close(const Frame& final) override;
    std::string stream_error(const ApiError& error) override;

private:
    ResponseContext context_;
};

}  // namespace cherenkov::serving
