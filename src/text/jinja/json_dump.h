// Python's json.dumps over interpreter values, as transformers' `tojson` filter calls it
// (ensure_ascii=False by default, optional indent, separators and sort_keys).
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

struct JsonOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // unset: one line
    // Unset: ", " and ": " without indent, "," and ": " with it (json.dumps defaults).
    std::optional<std::string> item_separator;
    std::optional<std::string> key_separator;
    bool sort_keys = false;
};

// Throws InvalidInput "Object of type X is not JSON serializable" for undefined and objects.
std::string dump_json(const Value& value, const JsonOptions& options);

// Python's JSON string encoding (with quotes).
void append_json_string(std::string& out, const std::string& text, bool ensure_ascii);

}  // namespace cherenkov::text::jinja
