// Python's unicode-escape decoding of string literals, byte for byte as Jinja2 applies it:
// `raw.encode("ascii", "backslashreplace").decode("unicode-escape")`.
#include "text/jinja/string_literal.h"

#include <cstdio>

#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The ASCII text backslashreplace makes of a non-ASCII code point, without its backslash.
std::string backslash_replacement(char32_t c) {
    char buffer[16];
    if (c <= 0xFF) {
        std::snprintf(buffer, sizeof(buffer), "x%02x", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
        std::snprintf(buffer, sizeof(buffer), "u%04x", static_cast<unsigned>(c));
    } else {
        std::snprintf(buffer, sizeof(buffer), "U%08x", static_cast<unsigned>(c));
    }
    return buffer;
}

// \xhh, \uhhhh, \Uhhhhhhhh with exactly `n_digits` hex digits.
bool hex_escape(const std::u32string& text, size_t& pos, int n_digits, std::string& out,
                std::string& error) {
    uint32_t value = 0;
    for (int digit = 0; digit < n_digits; ++digit) {
        size_t at = pos + 1 + static_cast<size_t>(digit);
        int v = at < text.size() && text[at] < 0x80 ? hex_value(static_cast<char>(text[at])) : -1;
        if (v < 0) {
            error = n_digits == 2 ? "truncated \\xXX escape"
                                  : (n_digits == 4 ? "truncated \\uXXXX escape"
                                                   : "truncated \\UXXXXXXXX escape");
            return false;
        }
        value = value * 16 + static_cast<uint32_t>(v);
    }
    if (value > 0x10FFFF) {
        error = "illegal Unicode character";
        return false;
    }
    if (value >= 0xD800 && value <= 0xDFFF) {
        error = "string literal holds a lone surrogate, which has no UTF-8 form";
        return false;
    }
    append_utf8(out, value);
    pos += 1 + static_cast<size_t>(n_digits);
    return true;
}

}  // namespace

bool unescape_string_literal(std::string_view raw, std::string& out, std::string& error) {
    // Non-ASCII characters reach the codec as backslash escapes; a backslash right before one
    // therefore escapes the replacement's own backslash.
    std::u32string text = decode_utf8(raw);
    out.clear();
    size_t pos = 0;
    while (pos < text.size()) {
        char32_t c = text[pos];
        if (c != '\\') {
            append_utf8(out, c);
            ++pos;
            continue;
        }
        if (pos + 1 >= text.size()) {
            error = "\\ at end of string";
            return false;
        }
        char32_t next = text[pos + 1];
        if (next >= 0x80) {
            out += '\\';
            out += backslash_replacement(next);
            pos += 2;
            continue;
        }
        switch (next) {
            case '\n': pos += 2; continue;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x':
                ++pos;
                if (!hex_escape(text, pos, 2, out, error)) return false;
                continue;
            case 'u':
                ++pos;
                if (!hex_escape(text, pos, 4, out, error)) return false;
                continue;
            case 'U':
                ++pos;
                if (!hex_escape(text, pos, 8, out, error)) return false;
                continue;
            case 'N': error = "\\N{...} escapes are not supported"; return false;
            default:
                if (next >= '0' && next <= '7') {
                    uint32_t value = 0;
                    size_t at = pos + 1;
                    for (int digit = 0;
                         digit < 3 && at < text.size() && text[at] >= '0' && text[at] <= '7';
                         ++digit) {
                        value = value * 8 + (text[at++] - '0');
                    }
                    append_utf8(out, value);
                    pos = at;
                    continue;
                }
                out += '\\';
                append_utf8(out, next);
        }
        pos += 2;
    }
    return true;
}

}  // namespace cherenkov::text::jinja
