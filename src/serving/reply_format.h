// The wire format one generation request answers in (OpenAI's chat and text completions,
// Anthropic's messages): the HTTP side runs every request the same way (parse, register, submit
// to the worker, wait, settle) and asks its ReplyFormat for the bytes of the JSON response, the
// server-sent events and the error bodies, so no API forks the generation path.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "serving/api_error.h"
#include "serving/request_channel.h"

namespace cherenkov::serving {

class ReplyFormat {
public:
    virtual ~ReplyFormat() = default;

    // The body of an error answered with error.status().
    virtual nlohmann::json error_body(const ApiError& error) const = 0;
    // The whole response of a request without `stream`.
    virtual nlohmann::json response(const Frame& final) const = 0;

    // Streams, in order: what opens the stream (may be empty), one piece per output frame, then
    // either the closing events or the error events, each including the stream's terminator.
    virtual std::string stream_open() = 0;
    virtual std::string stream_delta(const OutputDelta& delta) = 0;
    virtual std::string stream_close(const Frame& final) = 0;
    virtual std::string stream_error(const ApiError& error) = 0;
    // Called while no frame arrives; what to write to keep the connection alive (may be empty).
    virtual std::string stream_idle(std::chrono::steady_clock::time_point /*now*/) { return {}; }
};

}  // namespace cherenkov::serving
