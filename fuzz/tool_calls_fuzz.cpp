// Fuzzes the incremental tool-call parser: the first byte picks a split point of the rest.
// Parsing in one chunk, in two chunks at that point, and in small chunks must give the same
// content, calls and diagnostics; calls must carry a JSON object; text without a marker must
// come back unchanged. Any mismatch aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "text/tool_calls/tool_call_parser.h"
#include "text/tool_calls/tool_spec.h"

namespace {

using cherenkov::text::ParseDelta;
using cherenkov::text::ParseResult;
using cherenkov::text::ToolCall;
using cherenkov::text::ToolCallParser;
using cherenkov::text::ToolSpec;
using Json = nlohmann::ordered_json;

const std::vector<ToolSpec>& fuzz_tools() {
    static const std::vector<ToolSpec> tools = cherenkov::text::parse_tools(Json::parse(R"([
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
          "n": {"type": "number"}, "b": {"type": "boolean"}, "z": {"type": "null"},
          "o": {"type": "object"}, "a": {"type": "array"},
          "u": {"anyOf": [{"type": "integer"}, {"type": "null"}, {"type": "array"}]}}}}},
      {"type": "function", "function": {"name": "g"}}
    ])"));
    return tools;
}

struct Outcome {
    std::string content;
    std::vector<ToolCall> calls;
    std::vector<std::string> diagnostics;
    std::vector<std::string> deltas;
};

Outcome parse(std::string_view text, const std::vector<size_t>& cuts) {
    ToolCallParser parser(fuzz_tools(), 99);
    Outcome outcome;
    auto take = [&](ParseDelta& delta) {
        outcome.content += delta.content;
        outcome.deltas.push_back(delta.content);
        for (ToolCall& call : delta.calls) outcome.calls.push_back(std::move(call));
    };
    size_t begin = 0;
    for (size_t cut : cuts) {
        ParseDelta delta = parser.push(text.substr(begin, cut - begin));
        take(delta);
        begin = cut;
    }
    ParseDelta delta = parser.push(text.substr(begin));
    take(delta);
    ParseResult result = parser.finish();
    take(result.tail);
    if (result.content != outcome.content || result.calls != outcome.calls) {
        std::fprintf(stderr, "finish() totals differ from the deltas\n");
        std::abort();
    }
    outcome.diagnostics = std::move(result.diagnostics);
    return outcome;
}

void check_same(const Outcome& expected, const Outcome& actual, const char* how) {
    if (expected.content == actual.content && expected.calls == actual.calls &&
        expected.diagnostics == actual.diagnostics) {
        return;
    }
    std::fprintf(stderr, "tool-call parse differs when fed %s\n", how);
    std::abort();
}

bool is_valid_utf8(std::string_view text) {
    return cherenkov::text::replace_invalid_utf8(text) == text;
}

void check_calls(const Outcome& outcome) {
    for (const ToolCall& call : outcome.calls) {
        Json arguments = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
        if (!arguments.is_object() || arguments != call.argument_values ||
            !is_valid_utf8(call.name) || call.id.size() != 29) {
            std::fprintf(stderr, "malformed call\n");
            std::abort();
        }
        (void)cherenkov::text::tool_call_to_json(call).dump();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    size_t split = static_cast<size_t>(data[0]) * (text.size() + 1) / 256;
    size_t step = data[0] % 7 + 1;

    Outcome whole = parse(text, {});
    check_calls(whole);
    check_same(whole, parse(text, {split}), "in two chunks");
    std::vector<size_t> small_cuts;
    for (size_t cut = step; cut < text.size(); cut += step) small_cuts.push_back(cut);
    Outcome small = parse(text, small_cuts);
    check_same(whole, small, "in small chunks");

    if (whole.content.size() > text.size()) std::abort();
    if (text.find("<tool_call>") == std::string_view::npos &&
        (whole.content != text || !whole.calls.empty() || !whole.diagnostics.empty())) {
        std::fprintf(stderr, "text without a marker changed\n");
        std::abort();
    }
    if (is_valid_utf8(text)) {
        for (const std::string& delta : small.deltas) {
            if (!is_valid_utf8(delta)) {
                std::fprintf(stderr, "a content delta cuts a UTF-8 character\n");
                std::abort();
            }
        }
    }
    return 0;
}
