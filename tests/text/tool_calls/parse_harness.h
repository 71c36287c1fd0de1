// Test helpers for the tool-call parser: run an input through it in one chunk, in every
// two-chunk split, and byte by byte, and check all of them agree.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "text/tool_calls/tool_call_parser.h"
#include "text/tool_calls/tool_spec.h"

namespace cherenkov::text::harness {

struct Outcome {
    std::string content;  // concatenated deltas
    std::vector<ToolCall> calls;
    std::vector<std::string> diagnostics;
    std::vector<std::string> deltas;  // each non-empty content delta

    bool operator==(const Outcome& other) const {
        return content == other.content && calls == other.calls && diagnostics == other.diagnostics;
    }
};

inline std::vector<ToolSpec> test_tools() {
    return parse_tools(nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {
          "city": {"type": "string"}, "days": {"type": "integer"},
          "units": {"enum": ["c", "f"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "write_file",
        "parameters": {"type": "object", "properties": {
          "path": {"type": "string"}, "content": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "list_files"}},
      {"type": "function", "function": {"name": "typed", "parameters": {"type": "object",
        "properties": {
          "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
          "b": {"type": "boolean"}, "z": {"type": "null"}, "o": {"type": "object"},
          "a": {"type": "array"}, "si": {"type": ["string", "integer"]},
          "on": {"anyOf": [{"type": "number"}, {"type": "null"}]},
          "any": {"description": "no type"}}}}}
    ])"));
}

// Feeds `chunks` in order and finishes.
inline Outcome parse_chunks(const std::vector<std::string_view>& chunks, uint64_t seed = 7) {
    ToolCallParser parser(test_tools(), seed);
    Outcome outcome;
    auto take = [&](ParseDelta& delta) {
        if (!delta.content.empty()) outcome.deltas.push_back(delta.content);
        outcome.content += delta.content;
        for (ToolCall& call : delta.calls) outcome.calls.push_back(std::move(call));
    };
    for (std::string_view chunk : chunks) {
        ParseDelta delta = parser.push(chunk);
        take(delta);
    }
    ParseResult result = parser.finish();
    take(result.tail);
    EXPECT_EQ(result.content, outcome.content);
    EXPECT_EQ(result.calls, outcome.calls);
    outcome.diagnostics = result.diagnostics;
    return outcome;
}

inline Outcome parse_whole(std::string_view text) {
    return parse_chunks({text});
}

// Whether `text` is complete, valid UTF-8 (no character cut at either end).
inline bool is_valid_utf8(std::string_view text) {
    size_t at = 0;
    while (at < text.size()) {
        auto lead = static_cast<unsigned char>(text[at]);
        size_t length = lead < 0x80    ? 1
                        : lead >= 0xF0 ? 4
                        : lead >= 0xE0 ? 3
                        : lead >= 0xC0 ? 2
                                       : 0;
        if (length == 0 || at + length > text.size()) return false;
        for (size_t offset = 1; offset < length; ++offset) {
            if ((static_cast<unsigned char>(text[at + offset]) & 0xC0) != 0x80) return false;
        }
        at += length;
    }
    return true;
}

// Parses `text` whole, at every two-chunk split and byte by byte; all must agree. When the
// input is valid UTF-8, every delta must be too. Returns the one-chunk outcome.
inline Outcome parse_every_split(std::string_view text) {
    Outcome whole = parse_whole(text);
    bool valid = is_valid_utf8(text);
    for (size_t split = 0; split <= text.size(); ++split) {
        Outcome outcome = parse_chunks({text.substr(0, split), text.substr(split)});
        EXPECT_TRUE(outcome == whole) << "split at " << split << " of " << text;
        if (!(outcome == whole)) return whole;
        for (const std::string& delta : outcome.deltas) {
            EXPECT_TRUE(!valid || is_valid_utf8(delta)) << "split at " << split;
        }
    }
    std::vector<std::string_view> bytes;
    for (size_t at = 0; at < text.size(); ++at) bytes.push_back(text.substr(at, 1));
    Outcome bytewise = parse_chunks(bytes);
    EXPECT_TRUE(bytewise == whole) << "byte by byte: " << text;
    for (const std::string& delta : bytewise.deltas) {
        EXPECT_TRUE(!valid || is_valid_utf8(delta)) << "byte by byte";
    }
    return whole;
}

inline nlohmann::ordered_json arguments_of(const ToolCall& call) {
    return nlohmann::ordered_json::parse(call.arguments);
}

inline bool any_diagnostic_contains(const Outcome& outcome, std::string_view needle) {
    for (const std::string& line : outcome.diagnostics) {
        if (line.find(needle) != std::string::npos) return true;
    }
    return false;
}

}  // namespace cherenkov::text::harness
