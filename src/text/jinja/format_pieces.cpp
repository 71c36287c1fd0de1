// Formatting pieces shared by percent_format.cpp and python_format.cpp.
#include "text/jinja/format_pieces.h"

#include <cstdio>

#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

std::string ascii_repr(const Value& value) {
    std::string out;
    char buffer[16];
    for (char32_t c : decode_utf8(repr(value))) {
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            if (c <= 0xFF) {
                std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned>(c));
            } else if (c <= 0xFFFF) {
                std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
            } else {
                std::snprintf(buffer, sizeof(buffer), "\\U%08x", static_cast<unsigned>(c));
            }
            out += buffer;
        }
    }
    return out;
}

std::string truncate_code_points(const std::string& text, std::optional<int64_t> precision) {
    if (!precision) return text;
    return text.substr(0, code_point_offset(text, static_cast<size_t>(*precision)));
}

void pad(std::string& out, const std::string& body, size_t width, char align, char32_t fill) {
    size_t n = count_code_points(body);
    if (n >= width) {
        out += body;
        return;
    }
    size_t missing = width - n;
    size_t left = align == '<' ? 0 : (align == '^' ? missing / 2 : missing);
    std::string fill_text;
    append_utf8(fill_text, fill);
    for (size_t step = 0; step < left; ++step) out += fill_text;
    out += body;
    for (size_t step = left; step < missing; ++step) out += fill_text;
}

std::string format_double(char conversion, int precision, double value, bool alternate) {
    char buffer[512];
    auto print = [&](char* out, size_t size) {
        switch (conversion) {
            case 'e':
                return alternate ? std::snprintf(out, size, "%#.*e", precision, value)
                                 : std::snprintf(out, size, "%.*e", precision, value);
            case 'E':
                return alternate ? std::snprintf(out, size, "%#.*E", precision, value)
                                 : std::snprintf(out, size, "%.*E", precision, value);
            case 'F':
                return alternate ? std::snprintf(out, size, "%#.*F", precision, value)
                                 : std::snprintf(out, size, "%.*F", precision, value);
            case 'g':
                return alternate ? std::snprintf(out, size, "%#.*g", precision, value)
                                 : std::snprintf(out, size, "%.*g", precision, value);
            case 'G':
                return alternate ? std::snprintf(out, size, "%#.*G", precision, value)
                                 : std::snprintf(out, size, "%.*G", precision, value);
            default:
                return alternate ? std::snprintf(out, size, "%#.*f", precision, value)
                                 : std::snprintf(out, size, "%.*f", precision, value);
        }
    };
    int n = print(buffer, sizeof(buffer));
    if (n < static_cast<int>(sizeof(buffer))) return std::string(buffer, static_cast<size_t>(n));
    std::string out(static_cast<size_t>(n) + 1, '\0');
    print(out.data(), out.size());
    out.resize(static_cast<size_t>(n));
    return out;
}

std::string int_digits(uint64_t magnitude, char type) {
    if (type == 'd' || type == 'n') return std::to_string(magnitude);
    if (magnitude == 0) return "0";
    int base = type == 'b' ? 2 : (type == 'o' ? 8 : 16);
    const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
    std::string digits;
    while (magnitude > 0) {
        digits.insert(digits.begin(), alphabet[magnitude % static_cast<uint64_t>(base)]);
        magnitude /= static_cast<uint64_t>(base);
    }
    return digits;
}

uint64_t magnitude_of(int64_t value) {
    return value < 0 ? ~static_cast<uint64_t>(value) + 1 : static_cast<uint64_t>(value);
}

}  // namespace cherenkov::text::jinja
