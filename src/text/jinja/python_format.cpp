// str.format() and the format mini-language, as CPython implements them for str, int (64-bit
// here) and float.
#include "text/jinja/python_format.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "text/jinja/format_pieces.h"
#include "text/jinja/lookup.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

// ---- format mini-language --------------------------------------------------------------------

struct FormatSpec {
    char32_t fill = ' ';
    char align = '\0';
    char sign = '-';
    bool alternate = false;
    size_t width = 0;
    char grouping = '\0';
    std::optional<int> precision;
    char type = '\0';
};

bool is_align(char32_t c) {
    return c == '<' || c == '>' || c == '=' || c == '^';
}

FormatSpec parse_spec(std::string_view text, const RenderLimits& limits) {
    FormatSpec spec;
    auto code_points = decode_utf8(text);
    size_t pos = 0;
    auto at = [&](size_t index) -> char32_t {
        return index < code_points.size() ? code_points[index] : 0;
    };
    if (code_points.size() >= 2 && is_align(at(1))) {
        spec.fill = at(0);
        spec.align = static_cast<char>(at(1));
        pos = 2;
    } else if (is_align(at(0))) {
        spec.align = static_cast<char>(at(0));
        pos = 1;
    }
    if (at(pos) == '+' || at(pos) == '-' || at(pos) == ' ')
        spec.sign = static_cast<char>(at(pos++));
    if (at(pos) == 'z') ++pos;
    if (at(pos) == '#') {
        spec.alternate = true;
        ++pos;
    }
    if (at(pos) == '0') {
        if (spec.align == '\0') {
            spec.fill = '0';
            spec.align = '=';
        }
        ++pos;
    }
    size_t width = 0;
    while (at(pos) >= '0' && at(pos) <= '9') {
        width = width * 10 + (at(pos++) - '0');
        if (width > limits.max_string_bytes)
            throw_invalid("Too many decimal digits in format string");
    }
    spec.width = width;
    if (at(pos) == ',' || at(pos) == '_') spec.grouping = static_cast<char>(at(pos++));
    if (at(pos) == '.') {
        ++pos;
        if (!(at(pos) >= '0' && at(pos) <= '9'))
            throw_invalid("Format specifier missing precision");
        int precision = 0;
        while (at(pos) >= '0' && at(pos) <= '9') {
            precision = precision * 10 + static_cast<int>(at(pos++) - '0');
            if (precision > 10000) throw_invalid("precision too big");
        }
        spec.precision = precision;
    }
    if (pos < code_points.size()) spec.type = static_cast<char>(code_points[pos++]);
    if (pos != code_points.size()) throw_invalid("Invalid format specifier");
    return spec;
}

std::string group_digits(const std::string& digits, char separator, size_t every) {
    if (separator == '\0') return digits;
    std::string out;
    size_t count = 0;
    for (size_t index = digits.size(); index > 0; --index) {
        if (count > 0 && count % every == 0) out.insert(out.begin(), separator);
        out.insert(out.begin(), digits[index - 1]);
        ++count;
    }
    return out;
}

std::string align_number(const std::string& sign, const std::string& body, const FormatSpec& spec) {
    std::string out;
    char align = spec.align == '\0' ? '>' : spec.align;
    if (align == '=') {
        std::string fill_text;
        append_utf8(fill_text, spec.fill);
        size_t n = count_code_points(sign + body);
        out = sign;
        for (size_t step = n; step < spec.width; ++step) out += fill_text;
        out += body;
        return out;
    }
    pad(out, sign + body, spec.width, align, spec.fill);
    return out;
}

std::string sign_of(bool negative, char sign) {
    if (negative) return "-";
    if (sign == '+') return "+";
    if (sign == ' ') return " ";
    return "";
}

std::string format_float_spec(double number, FormatSpec spec);

std::string format_int_spec(int64_t number, const FormatSpec& spec) {
    char type = spec.type == '\0' ? 'd' : spec.type;
    if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
        type == '%') {
        return format_float_spec(static_cast<double>(number), spec);
    }
    if (spec.precision) throw_invalid("Precision not allowed in integer format specifier");
    if (type == 'c') {
        std::string out;
        if (number < 0 || number > 0x10FFFF) throw_invalid("%c arg not in range(0x110000)");
        append_utf8(out, static_cast<char32_t>(number));
        std::string padded;
        pad(padded, out, spec.width, spec.align == '\0' ? '<' : spec.align, spec.fill);
        return padded;
    }
    if (type != 'd' && type != 'n' && type != 'b' && type != 'o' && type != 'x' && type != 'X') {
        throw_invalid(std::string("Unknown format code '") + type + "' for object of type 'int'");
    }
    std::string digits = int_digits(magnitude_of(number), type);
    digits = group_digits(digits, spec.grouping, type == 'd' || type == 'n' ? 3 : 4);
    if (spec.alternate && type != 'd' && type != 'n') {
        digits.insert(0, type == 'b' ? "0b" : (type == 'o' ? "0o" : (type == 'x' ? "0x" : "0X")));
    }
    return align_number(sign_of(number < 0, spec.sign), digits, spec);
}

// Python's 'g' and the no-type float format with a precision.
std::string general_float(double magnitude, int precision, bool alternate, bool keep_point_digit) {
    if (precision == 0) precision = 1;
    std::string scientific = format_double('e', precision - 1, magnitude, false);
    int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
    int switch_at = keep_point_digit ? precision - 1 : precision;
    bool fixed = exponent >= -4 && (keep_point_digit ? exponent < switch_at : exponent < precision);
    std::string text = fixed ? format_double('f', precision - 1 - exponent, magnitude, alternate)
                             : format_double('e', precision - 1, magnitude, alternate);
    if (!alternate) {
        size_t e_pos = text.find('e');
        std::string mantissa = text.substr(0, e_pos);
        std::string tail = e_pos == std::string::npos ? "" : text.substr(e_pos);
        if (mantissa.find('.') != std::string::npos) {
            while (mantissa.back() == '0') mantissa.pop_back();
            if (mantissa.back() == '.') mantissa.pop_back();
        }
        if (keep_point_digit && fixed && mantissa.find('.') == std::string::npos) mantissa += ".0";
        text = mantissa + tail;
    }
    return text;
}

std::string format_float_spec(double number, FormatSpec spec) {
    char type = spec.type;
    bool negative = std::signbit(number) && !std::isnan(number);
    double magnitude = std::fabs(number);
    std::string body;
    if (std::isnan(number) || std::isinf(number)) {
        body = std::isnan(number) ? "nan" : "inf";
        if (type == 'E' || type == 'F' || type == 'G') body = py_upper(body);
        if (type == '%') body += '%';
    } else {
        switch (type) {
            case 'f':
            case 'F':
            case 'e':
            case 'E': {
                body = format_double(type, spec.precision.value_or(6), magnitude, spec.alternate);
                break;
            }
            case '%':
                body = format_double('f', spec.precision.value_or(6), magnitude * 100,
                                     spec.alternate) +
                       "%";
                break;
            case 'g':
            case 'G':
            case 'n':
                body = general_float(magnitude, spec.precision.value_or(6), spec.alternate, false);
                if (type == 'G') body = py_upper(body);
                break;
            case '\0':
                body = spec.precision
                           ? general_float(magnitude, *spec.precision, spec.alternate, true)
                           : repr_float(magnitude);
                break;
            default:
                throw_invalid(std::string("Unknown format code '") + type +
                              "' for object of type 'float'");
        }
    }
    if (spec.grouping != '\0' && std::isfinite(number)) {
        size_t end = body.find_first_of(".e%");
        std::string integral = body.substr(0, end);
        body = group_digits(integral, spec.grouping, 3) +
               (end == std::string::npos ? "" : body.substr(end));
    }
    return align_number(sign_of(negative, spec.sign), body, spec);
}

// ---- str.format() -----------------------------------------------------------------------------

class BraceFormatter {
public:
    BraceFormatter(const std::string& format, const CallArgs& args, const RenderLimits& limits)
        : format_(format), args_(args), limits_(limits) {}

    std::string run(int depth = 0) {
        if (depth > 2) throw_invalid("Max string recursion exceeded");
        std::string out;
        while (pos_ < format_.size()) {
            char c = format_[pos_];
            if (c == '}') {
                if (pos_ + 1 < format_.size() && format_[pos_ + 1] == '}') {
                    out += '}';
                    pos_ += 2;
                    continue;
                }
                throw_invalid("Single '}' encountered in format string");
            }
            if (c != '{') {
                out += c;
                ++pos_;
                continue;
            }
            if (pos_ + 1 < format_.size() && format_[pos_ + 1] == '{') {
                out += '{';
                pos_ += 2;
                continue;
            }
            out += replacement_field(depth);
            check_string_size(out.size(), limits_);
        }
        return out;
    }

private:
    // Text of the field up to its matching '}', with nested braces kept.
    std::string field_text() {
        size_t start = ++pos_;
        int level = 1;
        while (pos_ < format_.size()) {
            if (format_[pos_] == '{') ++level;
            if (format_[pos_] == '}' && --level == 0) break;
            ++pos_;
        }
        if (pos_ >= format_.size()) throw_invalid("expected '}' before end of string");
        return format_.substr(start, pos_++ - start);
    }

    Value lookup_field(const std::string& name) {
        size_t end = name.find_first_of(".[");
        std::string head = name.substr(0, end);
        Value value;
        if (head.empty()) {
            if (manual_)
                throw_invalid(
                    "cannot switch from manual field specification to automatic field numbering");
            automatic_ = true;
            value = positional(next_index_++);
        } else if (head.find_first_not_of("0123456789") == std::string::npos) {
            if (automatic_)
                throw_invalid(
                    "cannot switch from automatic field numbering to manual field specification");
            manual_ = true;
            value = positional(std::stoull(head.substr(0, 9)));
        } else {
            value = keyword(head);
        }
        while (end != std::string::npos && end < name.size()) {
            if (name[end] == '.') {
                size_t next = name.find_first_of(".[", end + 1);
                value = get_attribute(
                    value, name.substr(end + 1, next == std::string::npos ? next : next - end - 1));
                end = next;
            } else {
                size_t close = name.find(']', end);
                if (close == std::string::npos) throw_invalid("Missing ']' in format string");
                std::string key = name.substr(end + 1, close - end - 1);
                bool numeric =
                    !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
                value = get_item(value, numeric ? Value::integer(std::stoll(key.substr(0, 18)))
                                                : Value::string(key));
                end = close + 1 < name.size() ? close + 1 : std::string::npos;
            }
            if (value.is_undefined()) fail_undefined(value);
        }
        return value;
    }

    Value positional(size_t index) {
        if (index >= args_.positional.size()) {
            throw_invalid("Replacement index " + std::to_string(index) +
                          " out of range for positional args tuple");
        }
        return args_.positional[index];
    }

    Value keyword(const std::string& name) {
        for (const auto& [key, value] : args_.keywords) {
            if (key == name) return value;
        }
        throw_invalid("KeyError: " + repr_string(name));
    }

    std::string replacement_field(int depth) {
        std::string field = field_text();
        size_t colon = field.find(':');
        std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
        std::string name = field.substr(0, colon);
        char conversion = '\0';
        size_t bang = name.find('!');
        if (bang != std::string::npos) {
            if (bang + 2 != name.size()) throw_invalid("expected ':' after conversion specifier");
            conversion = name[bang + 1];
            name = name.substr(0, bang);
        }
        Value value = lookup_field(name);
        if (spec.find('{') != std::string::npos) {
            BraceFormatter nested(spec, args_, limits_);
            nested.automatic_ = automatic_;
            nested.manual_ = manual_;
            nested.next_index_ = next_index_;
            spec = nested.run(depth + 1);
            next_index_ = nested.next_index_;
        }
        if (conversion == 'r') {
            value = Value::string(repr(value));
        } else if (conversion == 's') {
            value = Value::string(to_str(value));
        } else if (conversion == 'a') {
            value = Value::string(ascii_repr(value));
        } else if (conversion != '\0') {
            throw_invalid(std::string("Unknown conversion specifier ") + conversion);
        }
        return format_value(value, spec, limits_);
    }

    const std::string& format_;
    const CallArgs& args_;
    const RenderLimits& limits_;
    size_t pos_ = 0;
    size_t next_index_ = 0;
    bool automatic_ = false;
    bool manual_ = false;
};

}  // namespace

std::string brace_format(const std::string& format, const CallArgs& args,
                         const RenderLimits& limits) {
    return BraceFormatter(format, args, limits).run();
}

std::string format_value(const Value& value, std::string_view spec_text,
                         const RenderLimits& limits) {
    if (spec_text.empty()) return to_str(value);
    FormatSpec spec = parse_spec(spec_text, limits);
    check_string_size(spec.width, limits);
    if (value.is_string()) {
        if (spec.type != '\0' && spec.type != 's') {
            throw_invalid(std::string("Unknown format code '") + spec.type +
                          "' for object of type 'str'");
        }
        if (spec.sign != '-') throw_invalid("Sign not allowed in string format specifier");
        if (spec.align == '=')
            throw_invalid("'=' alignment not allowed in string format specifier");
        std::optional<int64_t> precision;
        if (spec.precision) precision = *spec.precision;
        std::string out;
        pad(out, truncate_code_points(value.as_string(), precision), spec.width,
            spec.align == '\0' ? '<' : spec.align, spec.fill);
        return out;
    }
    if (value.is_integral()) return format_int_spec(value.as_int(), spec);
    if (value.is_float()) return format_float_spec(value.as_float(), spec);
    throw_invalid("unsupported format string passed to " + value.type_name() + ".__format__");
}

}  // namespace cherenkov::text::jinja
