// Scalar and string filters (jinja2/filters.py, transformers' tojson) and the filter registry.
#include "text/jinja/filters.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/json_dump.h"
#include "text/jinja/lookup.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_text.h"
#include "text/jinja/renderer.h"
#include "text/jinja/sequence_filters.h"

namespace cherenkov::text::jinja {

namespace {

// Python's rules for underscores in numeric strings: only between two digits.
std::optional<std::string> drop_underscores(const std::string& text, bool (*is_digit_char)(char)) {
    std::string out;
    for (size_t index = 0; index < text.size(); ++index) {
        if (text[index] != '_') {
            out += text[index];
            continue;
        }
        bool between = index > 0 && index + 1 < text.size() && is_digit_char(text[index - 1]) &&
                       is_digit_char(text[index + 1]);
        if (!between) return std::nullopt;
    }
    return out;
}

// Python int(text, base) for base 10 (with base prefixes for 2, 8, 16 when base matches).
std::optional<int64_t> parse_python_int(const std::string& raw, int base) {
    std::string text = py_strip(raw, std::nullopt, StripSide::Both);
    bool negative = false;
    size_t pos = 0;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) negative = text[pos++] == '-';
    std::string digits = text.substr(pos);
    if (digits.size() > 2 && digits[0] == '0') {
        char prefix = static_cast<char>(digits[1] | 0x20);
        if ((prefix == 'x' && base == 16) || (prefix == 'o' && base == 8) ||
            (prefix == 'b' && base == 2)) {
            digits = digits.substr(2);
            if (!digits.empty() && digits[0] == '_') digits = digits.substr(1);
        }
    }
    auto is_alnum = [](char c) {
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    };
    auto cleaned = drop_underscores(
        digits,
        +[](char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); });
    if (!cleaned || cleaned->empty()) return std::nullopt;
    uint64_t value = 0;
    for (char c : *cleaned) {
        if (!is_alnum(c)) return std::nullopt;
        int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        if (digit >= base) return std::nullopt;
        if (value > (UINT64_MAX - static_cast<uint64_t>(digit)) / static_cast<uint64_t>(base)) {
            throw_invalid("integer string too large (the interpreter's ints are 64-bit)");
        }
        value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    }
    if (value > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) {
        throw_invalid("integer string too large (the interpreter's ints are 64-bit)");
    }
    return negative ? static_cast<int64_t>(~value + 1) : static_cast<int64_t>(value);
}

// Python float(text): decimal or inf/infinity/nan with optional sign and surrounding spaces.
std::optional<double> parse_python_float(const std::string& raw) {
    std::string text = py_strip(raw, std::nullopt, StripSide::Both);
    std::string body = text;
    bool negative = false;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
        negative = body[0] == '-';
        body = body.substr(1);
    }
    std::string lower = py_lower(body);
    if (lower == "inf" || lower == "infinity") return negative ? -INFINITY : INFINITY;
    if (lower == "nan") return negative ? -NAN : NAN;
    auto cleaned = drop_underscores(
        body, +[](char c) { return c >= '0' && c <= '9'; });
    if (!cleaned || cleaned->empty()) return std::nullopt;
    for (char c : *cleaned) {
        bool allowed =
            (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
        if (!allowed) return std::nullopt;
    }
    char* end = nullptr;
    double value = std::strtod(cleaned->c_str(), &end);
    if (end != cleaned->c_str() + cleaned->size()) return std::nullopt;
    return negative ? -value : value;
}

Value filter_abs(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("abs", args);
    if (value.is_float()) return Value::floating(std::fabs(value.as_float()));
    if (value.is_integral()) {
        if (value.as_int() == INT64_MIN)
            throw_invalid("integer overflow: result does not fit in 64 bits");
        return Value::integer(std::llabs(value.as_int()));
    }
    throw_invalid("bad operand type for abs(): '" + value.type_name() + "'");
}

Value filter_capitalize(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("capitalize", args);
    return Value::string(py_capitalize(to_str(value)), value.is_safe());
}

Value filter_center(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("center", args, {"width"});
    std::string text = to_str(value);
    int64_t width = bound.integer(0, 80);
    check_string_size(static_cast<size_t>(std::max<int64_t>(width, 0)), renderer.limits());
    auto n = static_cast<int64_t>(count_code_points(text));
    if (width <= n) return Value::string(text);
    // CPython's str.center puts the odd space on the left when the width is odd.
    int64_t margin = width - n;
    int64_t left = margin / 2 + (margin & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + text +
                         std::string(static_cast<size_t>(margin - left), ' '));
}

Value filter_default(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("default", args, {"default_value", "boolean"});
    bool use_default = value.is_undefined() || (bound.flag(1, false) && !value.truthy());
    if (!use_default) return value;
    return bound.has(0) ? bound.get(0) : Value::string("");
}

Value filter_escape(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("escape", args);
    if (value.is_safe()) return value;
    return Value::string(escape_html(to_str(value)), true);
}

Value filter_forceescape(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("forceescape", args);
    return Value::string(escape_html(to_str(value)), true);
}

Value filter_filesizeformat(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("filesizeformat", args, {"binary"});
    bool binary = bound.flag(0, false);
    if (!value.is_number() && !value.is_string())
        throw_invalid("float() argument must be a string or a real number");
    double bytes =
        value.is_string() ? parse_python_float(value.as_string()).value_or(NAN) : value.as_float();
    double base = binary ? 1024 : 1000;
    static const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    static const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    if (bytes == 1) return Value::string("1 Byte");
    if (bytes < base) return Value::string(std::to_string(static_cast<int64_t>(bytes)) + " Bytes");
    double unit = base;
    const char* prefix = nullptr;
    for (int index = 0; index < 8; ++index) {
        unit = std::pow(base, index + 2);
        prefix = binary ? kBinary[index] : kDecimal[index];
        if (bytes < unit) break;
    }
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.1f %s", base * bytes / unit, prefix);
    return Value::string(buffer);
}

Value filter_float(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("float", args, {"default"});
    if (value.is_undefined()) fail_undefined(value);
    Value fallback = bound.get(0, Value::floating(0.0));
    if (value.is_number()) return Value::floating(value.as_float());
    if (value.is_string()) {
        if (auto parsed = parse_python_float(value.as_string())) return Value::floating(*parsed);
    }
    return fallback;
}

Value filter_format(Renderer&, const Value& value, CallArgs& args) {
    if (!args.positional.empty() && !args.keywords.empty()) {
        throw_invalid("can't handle positional and keyword arguments at the same time");
    }
    Value format = Value::string(to_str(value), value.is_safe());
    if (!args.keywords.empty()) {
        Dict mapping;
        for (auto& [name, arg] : args.keywords) mapping.set(Value::string(name), arg);
        return Value::string(percent_format(format, Value::dict(std::move(mapping))));
    }
    return Value::string(percent_format(format, Value::tuple(std::move(args.positional))));
}

Value filter_indent(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("indent", args, {"width", "first", "blank"});
    std::string indention;
    if (bound.get(0).is_string()) {
        indention = bound.get(0).as_string();
    } else {
        int64_t width = bound.integer(0, 4);
        check_string_size(static_cast<size_t>(std::max<int64_t>(width, 0)), renderer.limits());
        indention.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
    }
    bool first = bound.flag(1, false);
    bool blank = bound.flag(2, false);
    // Jinja2 appends a newline to the value itself, which only works for strings.
    if (value.is_undefined()) fail_undefined(value);
    if (!value.is_string()) {
        throw_invalid("unsupported operand type(s) for +=: '" + value.type_name() + "' and 'str'");
    }
    auto lines = py_splitlines(value.as_string() + "\n", false);
    std::string out;
    for (size_t index = 0; index < lines.size(); ++index) {
        if (index > 0) out += "\n";
        bool indent_line = index > 0 && (blank || !lines[index].empty());
        if (indent_line) out += indention;
        out += lines[index];
        check_string_size(out.size(), renderer.limits());
    }
    if (first) out = indention + out;
    return Value::string(std::move(out), value.is_safe());
}

Value filter_int(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("int", args, {"default", "base"});
    Value fallback = bound.get(0, Value::integer(0));
    int64_t base = bound.integer(1, 10);
    if (value.is_undefined()) fail_undefined(value);
    if (value.is_integral()) return Value::integer(value.as_int());
    double number = NAN;
    if (value.is_string()) {
        if (base < 2 || base > 36) throw_invalid("int() base must be >= 2 and <= 36, or 0");
        if (auto parsed = parse_python_int(value.as_string(), static_cast<int>(base)))
            return Value::integer(*parsed);
        number = parse_python_float(value.as_string()).value_or(NAN);
    } else if (value.is_float()) {
        number = value.as_float();
    }
    if (!std::isfinite(number) || std::fabs(number) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(number)));
}

Value filter_lower(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("lower", args);
    return Value::string(py_lower(to_str(value)), value.is_safe());
}

Value filter_upper(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("upper", args);
    return Value::string(py_upper(to_str(value)), value.is_safe());
}

Value filter_replace(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("replace", args, {"old", "new", "count"}, 2);
    std::string old_text = to_str(bound.get(0));
    std::string new_text = to_str(bound.get(1));
    std::string text = to_str(value);
    int64_t count = bound.integer(2, -1);
    size_t n_matches = old_text.empty() ? count_code_points(text) + 1 : 0;
    if (new_text.size() > old_text.size() && !old_text.empty()) {
        for (size_t pos = text.find(old_text); pos != std::string::npos;
             pos = text.find(old_text, pos + old_text.size())) {
            ++n_matches;
        }
    }
    check_string_size(text.size() + n_matches * new_text.size(), renderer.limits());
    return Value::string(py_replace(text, old_text, new_text, count));
}

// Python round(): the correctly rounded decimal of the exact binary value.
Value filter_round(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("round", args, {"precision", "method"});
    int64_t precision = bound.integer(0, 0);
    std::string method = bound.string(1, "common");
    if (method != "common" && method != "ceil" && method != "floor") {
        throw_invalid("method must be common, ceil or floor");
    }
    if (!value.is_number())
        throw_invalid("type " + value.type_name() + " doesn't define __round__ method");
    if (method != "common") {
        double scale = std::pow(10.0, static_cast<double>(precision));
        double scaled = value.as_float() * scale;
        return Value::floating((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
    }
    if (value.is_integral()) {
        if (precision >= 0) return Value::integer(value.as_int());
        double scale = std::pow(10.0, static_cast<double>(-precision));
        return Value::integer(static_cast<int64_t>(
            std::nearbyint(static_cast<double>(value.as_int()) / scale) * scale));
    }
    double number = value.as_float();
    if (!std::isfinite(number)) return value;
    if (precision < 0) {
        double scale = std::pow(10.0, static_cast<double>(-precision));
        return Value::floating(std::nearbyint(number / scale) * scale);
    }
    if (precision > 340) return value;
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(precision), number);
    return Value::floating(std::strtod(buffer, nullptr));
}

Value filter_safe(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("safe", args);
    return Value::string(to_str(value), true);
}

Value filter_string(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("string", args);
    if (value.is_string()) return value;
    return Value::string(to_str(value));
}

// Jinja2's do_title: runs of word and separator ([-\s\(\{\[\<]) characters, each with its
// first character upper-cased and the rest lower-cased.
Value filter_title(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("title", args);
    std::string out;
    std::u32string run;
    bool run_is_separator = false;
    auto flush = [&] {
        if (run.empty()) return;
        out += py_upper(encode_utf8(run.substr(0, 1))) + py_lower(encode_utf8(run.substr(1)));
        run.clear();
    };
    for (char32_t c : decode_utf8(to_str(value))) {
        bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
        if (!run.empty() && separator != run_is_separator) flush();
        run_is_separator = separator;
        run.push_back(c);
    }
    flush();
    return Value::string(std::move(out), value.is_safe());
}

Value filter_tojson(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions options;
    options.ensure_ascii = bound.flag(0, false);
    const Value& indent = bound.get(1, Value::none());
    if (indent.is_string()) {
        options.indent = indent.as_string();
    } else if (indent.is_integral()) {
        int64_t width = std::max<int64_t>(indent.as_int(), 0);
        check_string_size(static_cast<size_t>(width), renderer.limits());
        options.indent = std::string(static_cast<size_t>(width), ' ');
    } else if (!indent.is_none()) {
        throw_invalid("can't multiply sequence by non-int of type '" + indent.type_name() + "'");
    }
    const Value& separators = bound.get(2, Value::none());
    if (!separators.is_none()) {
        ValueList pair = iterate(separators);
        if (pair.size() != 2)
            throw_invalid("separators must be an (item_separator, key_separator) pair");
        options.item_separator = to_str(pair[0]);
        options.key_separator = to_str(pair[1]);
    }
    options.sort_keys = bound.flag(3, false);
    std::string out = dump_json(value, options);
    check_string_size(out.size(), renderer.limits());
    return Value::string(std::move(out));
}

Value filter_trim(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("trim", args, {"chars"});
    return Value::string(py_strip(to_str(value), bound.string_or_none(0), StripSide::Both),
                         value.is_safe());
}

Value filter_truncate(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("truncate", args, {"length", "killwords", "end", "leeway"});
    int64_t max_length = bound.integer(0, 255);
    bool kill_words = bound.flag(1, false);
    std::string end = bound.string(2, "...");
    int64_t leeway = bound.integer(3, 5);
    auto n_end = static_cast<int64_t>(count_code_points(end));
    if (max_length < n_end)
        throw_invalid("expected length >= " + std::to_string(n_end) + ", got " +
                      std::to_string(max_length));
    if (leeway < 0) throw_invalid("expected leeway >= 0, got " + std::to_string(leeway));
    // Jinja2 measures and slices the value itself: a short list comes back unchanged.
    if (static_cast<int64_t>(length(value)) <= max_length + leeway) return value;
    if (!value.is_string())
        throw_invalid("can only concatenate " + value.type_name() + " (not \"str\") to " +
                      value.type_name());
    const std::string& text = value.as_string();
    std::string head =
        text.substr(0, code_point_offset(text, static_cast<size_t>(max_length - n_end)));
    if (kill_words) return Value::string(head + end);
    return Value::string(py_rsplit(head, std::string(" "), 1).front() + end);
}

Value filter_wordcount(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("wordcount", args);
    int64_t count = 0;
    bool in_word = false;
    for (char32_t c : decode_utf8(to_str(value))) {
        bool word = is_word_char(c);
        if (word && !in_word) ++count;
        in_word = word;
    }
    return Value::integer(count);
}

const std::map<std::string, FilterFunction, std::less<>>& registry() {
    static const std::map<std::string, FilterFunction, std::less<>> kFilters = {
        {"abs", filter_abs},
        {"attr", filter_attr},
        {"batch", filter_batch},
        {"capitalize", filter_capitalize},
        {"center", filter_center},
        {"count", filter_length},
        {"d", filter_default},
        {"default", filter_default},
        {"dictsort", filter_dictsort},
        {"e", filter_escape},
        {"escape", filter_escape},
        {"filesizeformat", filter_filesizeformat},
        {"first", filter_first},
        {"float", filter_float},
        {"forceescape", filter_forceescape},
        {"format", filter_format},
        {"indent", filter_indent},
        {"int", filter_int},
        {"items", filter_items},
        {"join", filter_join},
        {"last", filter_last},
        {"length", filter_length},
        {"list", filter_list},
        {"lower", filter_lower},
        {"map", filter_map},
        {"max", filter_max},
        {"min", filter_min},
        {"reject", filter_reject},
        {"rejectattr", filter_rejectattr},
        {"replace", filter_replace},
        {"reverse", filter_reverse},
        {"round", filter_round},
        {"safe", filter_safe},
        {"select", filter_select},
        {"selectattr", filter_selectattr},
        {"slice", filter_slice},
        {"sort", filter_sort},
        {"string", filter_string},
        {"sum", filter_sum},
        {"title", filter_title},
        {"tojson", filter_tojson},
        {"trim", filter_trim},
        {"truncate", filter_truncate},
        {"unique", filter_unique},
        {"upper", filter_upper},
        {"wordcount", filter_wordcount},
    };
    return kFilters;
}

}  // namespace

FilterFunction find_filter(std::string_view name) {
    auto found = registry().find(name);
    return found == registry().end() ? nullptr : found->second;
}

std::string filter_problem(std::string_view name, bool at_runtime) {
    if (find_filter(name) != nullptr) return "";
    static const std::set<std::string, std::less<>> kLeftOut = {
        "groupby", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap", "xmlattr",
    };
    if (kLeftOut.count(name) > 0) return "filter '" + std::string(name) + "' is not supported";
    return "No filter named '" + std::string(name) + (at_runtime ? "' found." : "'.");
}

}  // namespace cherenkov::text::jinja
