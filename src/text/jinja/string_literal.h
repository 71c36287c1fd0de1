// Decoding of template string literals: Jinja2 runs the text between the quotes through
// Python's "unicode-escape" codec (after backslash-escaping non-ASCII characters).
#pragma once

#include <string>
#include <string_view>

namespace cherenkov::text::jinja {

// Decodes `raw` (the literal without its quotes) into UTF-8 `out`. Returns false with a
// message in `error` for a malformed or unsupported escape.
bool unescape_string_literal(std::string_view raw, std::string& out, std::string& error);

}  // namespace cherenkov::text::jinja
