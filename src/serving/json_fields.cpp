#include "serving/json_fields.h"

#include <cmath>
#include <limits>

#include "serving/api_error.h"

namespace cherenkov::serving {
namespace {

// Deeper bodies are refused before anything walks them recursively (the chat template's
// tojson, schema checks). Real requests nest tool schemas a few levels deep.
constexpr int kMaxDepth = 64;

std::string format_number(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

}  // namespace

engine::SamplingOptions SamplingFields::over(const engine::SamplingOptions& defaults) const {
    engine::SamplingOptions out = defaults;
    if (temperature) out.temperature = *temperature;
    if (top_p) out.top_p = *top_p;
    if (top_k) out.top_k = *top_k;
    if (presence_penalty) out.presence_penalty = *presence_penalty;
    if (frequency_penalty) out.frequency_penalty = *frequency_penalty;
    if (repetition_penalty) out.repetition_penalty = *repetition_penalty;
    if (seed) out.seed = *seed;
    return out;
}

BodyJson parse_body(std::string_view body) {
    if (body.empty()) throw_bad_field("", "the request has no body; send a JSON object");
    try {
        BodyJson::parser_callback_t limit_depth = [](int depth, BodyJson::parse_event_t,
                                                     BodyJson&) {
            if (depth > kMaxDepth) {
                throw ApiError(
                    400, "the JSON body nests deeper than " + std::to_string(kMaxDepth) + " levels",
                    "invalid_request_error");
            }
            return true;
        };
        return BodyJson::parse(body.begin(), body.end(), limit_depth);
    } catch (const BodyJson::parse_error& e) {
        throw ApiError(400, std::string("the body is not valid JSON: ") + e.what(),
                       "invalid_request_error");
    }
}

const BodyJson* member(const BodyJson& body, std::string_view key) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

bool boolean_field(const BodyJson& value, const std::string& param) {
    if (!value.is_boolean()) throw_bad_field(param, "must be a boolean");
    return value.get<bool>();
}

int64_t integer_field(const BodyJson& value, const std::string& param, int64_t lo, int64_t hi) {
    // 3.0 is an integer to JSON Schema and to Python clients that compute a value.
    int64_t v = 0;
    if (value.is_number_integer()) {
        if (value.is_number_unsigned() &&
            value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            throw_bad_field(param, "must be at most " + std::to_string(hi));
        }
        v = value.get<int64_t>();
    } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
               std::floor(value.get<double>()) == value.get<double>() &&
               std::fabs(value.get<double>()) < 9.0e15) {
        v = static_cast<int64_t>(value.get<double>());
    } else {
        throw_bad_field(param, "must be an integer");
    }
    if (v < lo || v > hi) {
        throw_bad_field(param, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + std::to_string(v));
    }
    return v;
}

float number_field(const BodyJson& value, const std::string& param, double lo, double hi,
                   bool open_lo) {
    if (!value.is_number()) throw_bad_field(param, "must be a number");
    const double v = value.get<double>();
    const bool low_ok = open_lo ? v > lo : v >= lo;
    if (!std::isfinite(v) || !low_ok || v > hi) {
        throw_bad_field(param, std::string("must be in ") + (open_lo ? "(" : "[") +
                                   format_number(lo) + ", " + format_number(hi) + "], got " +
                                   format_number(v));
    }
    return static_cast<float>(v);
}

std::string string_field(const BodyJson& value, const std::string& param) {
    if (!value.is_string()) throw_bad_field(param, "must be a string");
    return value.get<std::string>();
}

SamplingFields parse_sampling_fields(const BodyJson& json) {
    SamplingFields s;
    if (const BodyJson* v = member(json, "temperature"))
        s.temperature = number_field(*v, "temperature", 0, 2);
    if (const BodyJson* v = member(json, "top_p")) s.top_p = number_field(*v, "top_p", 0, 1, true);
    if (const BodyJson* v = member(json, "top_k")) {
        // -1 is "off" to vLLM and llama.cpp clients, 0 to ours.
        s.top_k = static_cast<int32_t>(std::max<int64_t>(
            integer_field(*v, "top_k", -1, std::numeric_limits<int32_t>::max()), 0));
    }
    if (const BodyJson* v = member(json, "presence_penalty"))
        s.presence_penalty = number_field(*v, "presence_penalty", -2, 2);
    if (const BodyJson* v = member(json, "frequency_penalty"))
        s.frequency_penalty = number_field(*v, "frequency_penalty", -2, 2);
    if (const BodyJson* v = member(json, "repetition_penalty"))
        s.repetition_penalty = number_field(*v, "repetition_penalty", 0, 10, true);
    if (const BodyJson* v = member(json, "seed")) {
        s.seed = static_cast<uint64_t>(integer_field(
            *v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    }
    return s;
}

}  // namespace cherenkov::serving
