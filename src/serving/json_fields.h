// Typed reads of request-body fields, each failure a 400 naming the field (api_error.h): the
// completion bodies and the session body share them, and the sampling fields they both take.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/generate/sampler.h"

namespace cherenkov::serving {

using BodyJson = nlohmann::ordered_json;

// Sampling fields as the client gave them; absent ones take the server's defaults (and, with
// sessions, the session's settings).
struct SamplingFields {
    std::optional<float> temperature;
    std::optional<float> top_p;
    std::optional<int32_t> top_k;
    std::optional<float> presence_penalty;
    std::optional<float> frequency_penalty;
    std::optional<float> repetition_penalty;
    std::optional<uint64_t> seed;

    // These fields over `defaults`.
    engine::SamplingOptions over(const engine::SamplingOptions& defaults) const;
};

// The sampling fields' names, for the bodies' lists of known keys.
inline constexpr const char* kSamplingFieldNames[] = {
    "temperature",        "top_p", "top_k", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed"};

// Parses the body as a JSON object, refusing bodies nested deeper than 64 levels.
BodyJson parse_body(std::string_view body);

// The member, or null when absent or JSON null.
const BodyJson* member(const BodyJson& body, std::string_view key);

bool boolean_field(const BodyJson& value, const std::string& param);
// An integer in [lo, hi] (3.0 counts as 3, as for JSON Schema).
int64_t integer_field(const BodyJson& value, const std::string& param, int64_t lo, int64_t hi);
// A number in [lo, hi] (lo excluded when `open_lo`).
float number_field(const BodyJson& value, const std::string& param, double lo, double hi,
                   bool open_lo = false);
std::string string_field(const BodyJson& value, const std::string& param);

// Reads the sampling fields present in `body` (temperature 0-2, top_p (0, 1], top_k >= -1 with
// -1 meaning off, penalties -2..2, repetition_penalty (0, 10], seed a 64-bit integer).
SamplingFields parse_sampling_fields(const BodyJson& body);

}  // namespace cherenkov::serving
