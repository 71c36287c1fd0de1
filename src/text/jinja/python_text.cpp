// Python str semantics over UTF-8. Character properties come from utf8proc; where CPython uses
// full case mappings (SpecialCasing.txt) the common unconditional ones are listed below.
#include "text/jinja/python_text.h"

#include <utf8proc.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace cherenkov::text::jinja {

namespace {

utf8proc_category_t category(char32_t c) {
    return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Decodes one code point at `pos`; returns 0 length on invalid input.
size_t decode_one(std::string_view text, size_t pos, char32_t& out) {
    utf8proc_int32_t code_point = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                              static_cast<utf8proc_ssize_t>(text.size() - pos), &code_point);
    if (n <= 0) return 0;
    out = static_cast<char32_t>(code_point);
    return static_cast<size_t>(n);
}

struct SpecialCase {
    char32_t code_point;
    const char* upper;  // full uppercase mapping, UTF-8
    const char* title;  // full titlecase mapping, UTF-8
};

// Unconditional multi-character mappings from SpecialCasing.txt that text is likely to hold.
constexpr std::array<SpecialCase, 12> kSpecialCases = {{
    {0x00DF, "SS", "Ss"},
    {0x0149, "\xCA\xBCN", "\xCA\xBCN"},
    {0x01F0, "J\xCC\x8C", "J\xCC\x8C"},
    {0x0587, "\xD4\xB5\xD5\x92", "\xD4\xB5\xD6\x82"},
    {0xFB00, "FF", "Ff"},
    {0xFB01, "FI", "Fi"},
    {0xFB02, "FL", "Fl"},
    {0xFB03, "FFI", "Ffi"},
    {0xFB04, "FFL", "Ffl"},
    {0xFB05, "ST", "St"},
    {0xFB06, "ST", "St"},
    {0x1E9E, "\xE1\xBA\x9E", "\xE1\xBA\x9E"},
}};

const SpecialCase* find_special(char32_t c) {
    for (const auto& entry : kSpecialCases) {
        if (entry.code_point == c) return &entry;
    }
    return nullptr;
}

void append_upper(std::string& out, char32_t c) {
    if (const auto* special = find_special(c)) {
        out += special->upper;
        return;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}

void append_title(std::string& out, char32_t c) {
    if (const auto* special = find_special(c)) {
        out += special->title;
        return;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

// CPython lowers U+0130 to "i̇" and a capital sigma at the end of a word to the final form.
void append_lower(std::string& out, const std::u32string& text, size_t index) {
    char32_t c = text[index];
    if (c == 0x0130) {
        out += "i\xCC\x87";
        return;
    }
    if (c == 0x03A3) {
        bool after_cased = index > 0 && is_cased(text[index - 1]);
        bool before_cased = index + 1 < text.size() && is_cased(text[index + 1]);
        append_utf8(out, after_cased && !before_cased ? 0x03C2 : 0x03C3);
        return;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

bool in_set(char32_t c, const std::u32string& set) {
    return set.find(c) != std::u32string::npos;
}

bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
           c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        char32_t c = 0;
        size_t n = decode_one(text, pos, c);
        if (n == 0) return false;
        pos += n;
    }
    return true;
}

std::u32string decode_utf8(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        char32_t c = 0;
        size_t n = decode_one(text, pos, c);
        if (n == 0) throw_internal("invalid UTF-8 reached the template interpreter");
        out.push_back(c);
        pos += n;
    }
    return out;
}

void append_utf8(std::string& out, char32_t code_point) {
    utf8proc_uint8_t buffer[4];
    auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(code_point), buffer);
    out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

std::string encode_utf8(std::u32string_view code_points) {
    std::string out;
    out.reserve(code_points.size());
    for (char32_t c : code_points) append_utf8(out, c);
    return out;
}

size_t count_code_points(std::string_view text) {
    size_t n = 0;
    for (char byte : text) {
        if ((static_cast<unsigned char>(byte) & 0xC0) != 0x80) ++n;
    }
    return n;
}

size_t code_point_offset(std::string_view text, size_t index) {
    size_t seen = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
        if ((static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) continue;
        if (seen == index) return pos;
        ++seen;
    }
    return text.size();
}

bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
    if (c == ' ') return true;
    switch (category(c)) {
        case UTF8PROC_CATEGORY_CC:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_CS:
        case UTF8PROC_CATEGORY_CO:
        case UTF8PROC_CATEGORY_CN:
        case UTF8PROC_CATEGORY_ZL:
        case UTF8PROC_CATEGORY_ZP:
        case UTF8PROC_CATEGORY_ZS: return false;
        default: return true;
    }
}

bool is_alpha(char32_t c) {
    auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
           cat == UTF8PROC_CATEGORY_LO;
}

bool is_decimal(char32_t c) {
    return category(c) == UTF8PROC_CATEGORY_ND;
}

bool is_digit(char32_t c) {
    if (is_decimal(c)) return true;
    return c == 0xB2 || c == 0xB3 || c == 0xB9 || c == 0x2070 || (c >= 0x2074 && c <= 0x2079) ||
           (c >= 0x2080 && c <= 0x2089) || (c >= 0x2460 && c <= 0x2468) ||
           (c >= 0x2474 && c <= 0x247C) || (c >= 0x2488 && c <= 0x2490) || c == 0x24EA ||
           (c >= 0x24F5 && c <= 0x24FD) || c == 0x24FF || (c >= 0x2776 && c <= 0x277E) ||
           (c >= 0x2780 && c <= 0x2788) || (c >= 0x278A && c <= 0x2792);
}

bool is_numeric(char32_t c) {
    auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
           cat == UTF8PROC_CATEGORY_NO;
}

bool is_upper(char32_t c) {
    return category(c) == UTF8PROC_CATEGORY_LU;
}
bool is_lower(char32_t c) {
    return category(c) == UTF8PROC_CATEGORY_LL || c == 0xAA || c == 0xBA;
}
bool is_cased(char32_t c) {
    return is_upper(c) || is_lower(c) || category(c) == UTF8PROC_CATEGORY_LT;
}

bool is_word_char(char32_t c) {
    return c == '_' || is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c);
}

std::string py_upper(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char32_t c : decode_utf8(text)) append_upper(out, c);
    return out;
}

std::string py_lower(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    auto code_points = decode_utf8(text);
    for (size_t index = 0; index < code_points.size(); ++index)
        append_lower(out, code_points, index);
    return out;
}

std::string py_title(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    auto code_points = decode_utf8(text);
    bool previous_cased = false;
    for (size_t index = 0; index < code_points.size(); ++index) {
        char32_t c = code_points[index];
        if (previous_cased) {
            append_lower(out, code_points, index);
        } else {
            append_title(out, c);
        }
        previous_cased = is_cased(c);
    }
    return out;
}

std::string py_capitalize(std::string_view text) {
    std::string out;
    auto code_points = decode_utf8(text);
    for (size_t index = 0; index < code_points.size(); ++index) {
        if (index == 0) {
            append_title(out, code_points[0]);
        } else {
            append_lower(out, code_points, index);
        }
    }
    return out;
}

std::string py_swapcase(std::string_view text) {
    std::string out;
    auto code_points = decode_utf8(text);
    for (size_t index = 0; index < code_points.size(); ++index) {
        char32_t c = code_points[index];
        if (is_upper(c)) {
            append_lower(out, code_points, index);
        } else if (is_lower(c)) {
            append_upper(out, c);
        } else {
            append_utf8(out, c);
        }
    }
    return out;
}

std::string py_strip(std::string_view text, const std::optional<std::string>& chars,
                     StripSide side) {
    auto code_points = decode_utf8(text);
    std::u32string set = chars ? decode_utf8(*chars) : std::u32string();
    auto strippable = [&](char32_t c) { return chars ? in_set(c, set) : is_space(c); };
    size_t begin = 0;
    size_t end = code_points.size();
    if (side != StripSide::Right) {
        while (begin < end && strippable(code_points[begin])) ++begin;
    }
    if (side != StripSide::Left) {
        while (end > begin && strippable(code_points[end - 1])) --end;
    }
    return encode_utf8(std::u32string_view(code_points).substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view text,
                                  const std::optional<std::string>& separator, int64_t max_splits) {
    std::vector<std::string> parts;
    if (separator) {
        if (separator->empty()) throw_invalid("empty separator");
        size_t start = 0;
        while (max_splits < 0 || static_cast<int64_t>(parts.size()) < max_splits) {
            size_t found = text.find(*separator, start);
            if (found == std::string_view::npos) break;
            parts.emplace_back(text.substr(start, found - start));
            start = found + separator->size();
        }
        parts.emplace_back(text.substr(start));
        return parts;
    }
    auto code_points = decode_utf8(text);
    size_t pos = 0;
    size_t n = code_points.size();
    while (pos < n) {
        while (pos < n && is_space(code_points[pos])) ++pos;
        if (pos == n) break;
        if (max_splits >= 0 && static_cast<int64_t>(parts.size()) == max_splits) {
            size_t end = n;
            while (end > pos && is_space(code_points[end - 1])) --end;
            parts.push_back(encode_utf8(std::u32string_view(code_points).substr(pos, end - pos)));
            break;
        }
        size_t start = pos;
        while (pos < n && !is_space(code_points[pos])) ++pos;
        parts.push_back(encode_utf8(std::u32string_view(code_points).substr(start, pos - start)));
    }
    return parts;
}

std::vector<std::string> py_rsplit(std::string_view text,
                                   const std::optional<std::string>& separator,
                                   int64_t max_splits) {
    std::vector<std::string> parts;
    if (separator) {
        if (separator->empty()) throw_invalid("empty separator");
        size_t end = text.size();
        while (max_splits < 0 || static_cast<int64_t>(parts.size()) < max_splits) {
            if (end < separator->size()) break;
            size_t found = text.rfind(*separator, end - separator->size());
            if (found == std::string_view::npos) break;
            parts.emplace_back(
                text.substr(found + separator->size(), end - found - separator->size()));
            end = found;
        }
        parts.emplace_back(text.substr(0, end));
        return {parts.rbegin(), parts.rend()};
    }
    auto code_points = decode_utf8(text);
    size_t pos = code_points.size();
    while (pos > 0) {
        while (pos > 0 && is_space(code_points[pos - 1])) --pos;
        if (pos == 0) break;
        if (max_splits >= 0 && static_cast<int64_t>(parts.size()) == max_splits) {
            size_t begin = 0;
            while (begin < pos && is_space(code_points[begin])) ++begin;
            parts.push_back(
                encode_utf8(std::u32string_view(code_points).substr(begin, pos - begin)));
            break;
        }
        size_t end = pos;
        while (pos > 0 && !is_space(code_points[pos - 1])) --pos;
        parts.push_back(encode_utf8(std::u32string_view(code_points).substr(pos, end - pos)));
    }
    return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> py_splitlines(std::string_view text, bool keep_ends) {
    std::vector<std::string> lines;
    auto code_points = decode_utf8(text);
    size_t start = 0;
    size_t pos = 0;
    while (pos < code_points.size()) {
        char32_t c = code_points[pos];
        if (!is_line_break(c)) {
            ++pos;
            continue;
        }
        size_t line_end = pos;
        ++pos;
        if (c == '\r' && pos < code_points.size() && code_points[pos] == '\n') ++pos;
        size_t keep = keep_ends ? pos : line_end;
        lines.push_back(encode_utf8(std::u32string_view(code_points).substr(start, keep - start)));
        start = pos;
    }
    if (start < code_points.size()) {
        lines.push_back(encode_utf8(std::u32string_view(code_points).substr(start)));
    }
    return lines;
}

std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       int64_t count) {
    std::string out;
    int64_t done = 0;
    if (old_text.empty()) {
        auto code_points = decode_utf8(text);
        for (size_t index = 0; index <= code_points.size(); ++index) {
            if (count < 0 || done < count) {
                out += new_text;
                ++done;
            }
            if (index < code_points.size()) append_utf8(out, code_points[index]);
        }
        return out;
    }
    size_t start = 0;
    while (count < 0 || done < count) {
        size_t found = text.find(old_text, start);
        if (found == std::string_view::npos) break;
        out.append(text.substr(start, found - start));
        out.append(new_text);
        start = found + old_text.size();
        ++done;
    }
    out.append(text.substr(start));
    return out;
}

std::string repr_string(std::string_view text) {
    bool has_single = text.find('\'') != std::string_view::npos;
    bool has_double = text.find('"') != std::string_view::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t c : decode_utf8(text)) {
        char buffer[16];
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c >= 0x20 && (c < 0x7F || (c > 0x7F && is_printable(c)))) {
            append_utf8(out, c);
        } else if (c <= 0xFF) {
            std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned>(c));
            out += buffer;
        } else if (c <= 0xFFFF) {
            std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
            out += buffer;
        } else {
            std::snprintf(buffer, sizeof(buffer), "\\U%08x", static_cast<unsigned>(c));
            out += buffer;
        }
    }
    out += quote;
    return out;
}

std::string repr_float(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char buffer[64];
    auto result =
        std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
    std::string out;
    if (text.front() == '-') {
        out += '-';
        text.remove_prefix(1);
    }
    size_t e_pos = text.find('e');
    std::string digits;
    for (char c : text.substr(0, e_pos)) {
        if (c != '.') digits += c;
    }
    int exponent = 0;
    auto exponent_text = text.substr(e_pos + 1);
    if (exponent_text.front() == '+') exponent_text.remove_prefix(1);
    std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
    int point = exponent + 1;  // digits[0..point) lie before the decimal point
    int n_digits = static_cast<int>(digits.size());
    if (point <= -4 || point > 16) {
        out += digits[0];
        if (n_digits > 1) {
            out += '.';
            out += digits.substr(1);
        }
        std::snprintf(buffer, sizeof(buffer), "e%c%02d", exponent < 0 ? '-' : '+',
                      std::abs(exponent));
        out += buffer;
    } else if (point <= 0) {
        out += "0.";
        out.append(static_cast<size_t>(-point), '0');
        out += digits;
    } else if (point >= n_digits) {
        out += digits;
        out.append(static_cast<size_t>(point - n_digits), '0');
        out += ".0";
    } else {
        out += digits.substr(0, static_cast<size_t>(point));
        out += '.';
        out += digits.substr(static_cast<size_t>(point));
    }
    return out;
}

}  // namespace cherenkov::text::jinja
