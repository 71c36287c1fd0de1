// printf-style `str % args` as CPython's PyUnicode_Format does it: %(key)s mappings, flags,
// `*` widths, and the d i u o x X e E f F g G c r s a conversions.
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "text/jinja/format_pieces.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

struct PercentSpec {
    bool left = false;
    bool zero = false;
    bool plus = false;
    bool space = false;
    bool alternate = false;
    size_t width = 0;
    std::optional<int64_t> precision;
};

std::string sign_prefix(bool negative, const PercentSpec& spec) {
    if (negative) return "-";
    if (spec.plus) return "+";
    if (spec.space) return " ";
    return "";
}

std::string pad_number(const std::string& sign, const std::string& digits,
                       const PercentSpec& spec) {
    std::string body = sign + digits;
    if (body.size() >= spec.width) return body;
    size_t missing = spec.width - body.size();
    if (spec.left) return body + std::string(missing, ' ');
    if (spec.zero) return sign + std::string(missing, '0') + digits;
    return std::string(missing, ' ') + body;
}

std::string percent_integer(const Value& value, char type, const PercentSpec& spec) {
    int64_t number = 0;
    if (value.is_integral()) {
        number = value.as_int();
    } else if (value.is_float() && (type == 'd' || type == 'i' || type == 'u')) {
        double truncated = std::trunc(value.as_float());
        if (!std::isfinite(truncated))
            throw_invalid("cannot convert float NaN or infinity to integer");
        number = static_cast<int64_t>(truncated);
    } else if (type == 'd' || type == 'i' || type == 'u') {
        throw_invalid(std::string("%") + type + " format: a real number is required, not " +
                      value.type_name());
    } else {
        throw_invalid(std::string("%") + type + " format: an integer is required, not " +
                      value.type_name());
    }
    char digit_type = type == 'o' ? 'o' : (type == 'x' || type == 'X' ? type : 'd');
    std::string digits = int_digits(magnitude_of(number), digit_type);
    if (spec.precision && static_cast<int64_t>(digits.size()) < *spec.precision) {
        digits.insert(0, static_cast<size_t>(*spec.precision) - digits.size(), '0');
    }
    if (spec.alternate && digit_type != 'd') {
        digits.insert(0, digit_type == 'o' ? "0o" : (digit_type == 'x' ? "0x" : "0X"));
    }
    return pad_number(sign_prefix(number < 0, spec), digits, spec);
}

std::string percent_float(const Value& value, char type, const PercentSpec& spec) {
    if (!value.is_number()) throw_invalid("must be real number, not " + value.type_name());
    double number = value.as_float();
    std::string digits;
    if (std::isnan(number) || std::isinf(number)) {
        digits = std::isnan(number) ? "nan" : "inf";
        if (type == 'E' || type == 'F' || type == 'G') digits = py_upper(digits);
    } else {
        digits = format_double(type, static_cast<int>(spec.precision.value_or(6)),
                               std::fabs(number), spec.alternate);
    }
    bool negative = std::signbit(number) && !std::isnan(number);
    PercentSpec padding = spec;
    if (!std::isfinite(number)) padding.zero = false;
    return pad_number(sign_prefix(negative, spec), digits, padding);
}

std::string percent_char(const Value& value) {
    if (value.is_string() && count_code_points(value.as_string()) == 1) return value.as_string();
    if (!value.is_integral()) throw_invalid("%c requires int or char");
    int64_t code = value.as_int();
    if (code < 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
        throw_invalid("%c arg not in range(0x110000)");
    }
    std::string out;
    append_utf8(out, static_cast<char32_t>(code));
    return out;
}

std::string percent_convert(const Value& value, char type, const PercentSpec& spec) {
    switch (type) {
        case 's':
        case 'r':
        case 'a': {
            std::string text =
                type == 's' ? to_str(value) : (type == 'r' ? repr(value) : ascii_repr(value));
            std::string out;
            pad(out, truncate_code_points(text, spec.precision), spec.width, spec.left ? '<' : '>',
                ' ');
            return out;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'o':
        case 'x':
        case 'X': return percent_integer(value, type, spec);
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': return percent_float(value, type, spec);
        case 'c': {
            std::string out;
            pad(out, percent_char(value), spec.width, spec.left ? '<' : '>', ' ');
            return out;
        }
        default: {
            std::string message = "unsupported format character '";
            message += type;
            throw_invalid(message + "'");
        }
    }
}

class PercentFormatter {
public:
    PercentFormatter(const std::string& format, const Value& args) : format_(format), args_(args) {
        if (args.is_tuple()) {
            positional_ = args.as_list();
        } else {
            positional_ = {args};
        }
    }

    std::string run() {
        std::string out;
        while (pos_ < format_.size()) {
            size_t next = format_.find('%', pos_);
            if (next == std::string::npos) {
                out.append(format_, pos_, std::string::npos);
                break;
            }
            out.append(format_, pos_, next - pos_);
            pos_ = next + 1;
            out += conversion();
        }
        // CPython only complains about leftovers from a tuple or a value without __getitem__.
        bool subscriptable = args_.is_dict() || args_.is_list() || args_.is_undefined();
        if (next_arg_ < positional_.size() && !used_mapping_ &&
            (args_.is_tuple() || !subscriptable)) {
            throw_invalid("not all arguments converted during string formatting");
        }
        return out;
    }

private:
    char peek() const {
        if (pos_ >= format_.size()) throw_invalid("incomplete format");
        return format_[pos_];
    }

    Value next_arg() {
        if (next_arg_ >= positional_.size())
            throw_invalid("not enough arguments for format string");
        return positional_[next_arg_++];
    }

    int64_t star_or_number() {
        if (peek() == '*') {
            ++pos_;
            Value count = next_arg();
            if (!count.is_integral()) throw_invalid("* wants int");
            if (count.as_int() > (int64_t{1} << 24) || count.as_int() < -(int64_t{1} << 24)) {
                throw_invalid("width or precision too big");
            }
            return count.as_int();
        }
        int64_t number = 0;
        while (pos_ < format_.size() && format_[pos_] >= '0' && format_[pos_] <= '9') {
            number = number * 10 + (format_[pos_++] - '0');
            if (number > (int64_t{1} << 24)) throw_invalid("width or precision too big");
        }
        return number;
    }

    std::string conversion() {
        std::optional<Value> mapped;
        if (peek() == '(') {
            size_t close = format_.find(')', pos_);
            if (close == std::string::npos) throw_invalid("incomplete format key");
            if (!args_.is_dict()) throw_invalid("format requires a mapping");
            std::string key = format_.substr(pos_ + 1, close - pos_ - 1);
            const Value* found = args_.as_dict().find(std::string_view(key));
            if (found == nullptr) throw_invalid("KeyError: " + repr_string(key));
            mapped = *found;
            used_mapping_ = true;
            pos_ = close + 1;
        }
        PercentSpec spec;
        for (bool flags = true; flags;) {
            switch (peek()) {
                case '-': spec.left = true; break;
                case '0': spec.zero = true; break;
                case '+': spec.plus = true; break;
                case ' ': spec.space = true; break;
                case '#': spec.alternate = true; break;
                default: flags = false; continue;
            }
            ++pos_;
        }
        int64_t width = star_or_number();
        if (width < 0) {
            spec.left = true;
            width = -width;
        }
        spec.width = static_cast<size_t>(width);
        if (peek() == '.') {
            ++pos_;
            spec.precision = std::max<int64_t>(0, star_or_number());
        }
        while (peek() == 'h' || peek() == 'l' || peek() == 'L') ++pos_;
        char type = format_[pos_++];
        if (type == '%') return "%";
        Value value = mapped ? *mapped : next_arg();
        return percent_convert(value, type, spec);
    }

    const std::string& format_;
    const Value& args_;
    ValueList positional_;
    size_t pos_ = 0;
    size_t next_arg_ = 0;
    bool used_mapping_ = false;
};

}  // namespace

std::string percent_format(const Value& format, const Value& args) {
    if (format.is_safe()) {
        // Markup.__mod__ escapes each argument before formatting.
        auto escape = [](const Value& value) {
            if (value.is_safe()) return value;
            return Value::string(escape_html(to_str(value)), true);
        };
        Value escaped = args;
        if (args.is_tuple()) {
            ValueList items;
            for (const auto& item : args.as_list()) items.push_back(escape(item));
            escaped = Value::tuple(std::move(items));
        } else if (!args.is_dict() && !args.is_undefined()) {
            escaped = escape(args);
        }
        return PercentFormatter(format.as_string(), escaped).run();
    }
    return PercentFormatter(format.as_string(), args).run();
}

}  // namespace cherenkov::text::jinja
