// str methods with CPython's semantics: code point indices, Unicode whitespace and case
// rules, Markup kept where markupsafe keeps it.
#include <algorithm>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/lookup.h"
#include "text/jinja/method_table.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_text.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

namespace {

const std::string& text_of(const Value& self) {
    return self.as_string();
}

// Python slice bounds for find/count/startswith, as byte offsets into `text`.
std::pair<size_t, size_t> byte_range(const std::string& text, const BoundArgs& bound,
                                     size_t start_index) {
    auto n = static_cast<int64_t>(count_code_points(text));
    auto clamp = [n](int64_t index) {
        if (index < 0) index = std::max<int64_t>(0, index + n);
        return std::min(index, n);
    };
    int64_t start = clamp(bound.integer(start_index, 0));
    int64_t end = clamp(bound.integer(start_index + 1, n));
    if (end < start) end = start;
    return {code_point_offset(text, static_cast<size_t>(start)),
            code_point_offset(text, static_cast<size_t>(end))};
}

std::vector<std::string> affixes(const Value& arg, const char* method) {
    if (arg.is_string()) return {arg.as_string()};
    if (arg.is_tuple()) {
        std::vector<std::string> out;
        for (const auto& item : arg.as_list()) {
            if (!item.is_string())
                throw_invalid(std::string("tuple for ") + method + " must only contain str, not " +
                              item.type_name());
            out.push_back(item.as_string());
        }
        return out;
    }
    throw_invalid(std::string(method) + " first arg must be str or a tuple of str, not " +
                  arg.type_name());
}

Value str_affix(const Value& self, CallArgs& args, bool prefix) {
    const char* name = prefix ? "startswith" : "endswith";
    BoundArgs bound(name, args, {"affix", "start", "end"}, 1);
    const auto& text = text_of(self);
    auto [begin, end] = byte_range(text, bound, 1);
    std::string_view window = std::string_view(text).substr(begin, end - begin);
    for (const auto& affix : affixes(bound.get(0), name)) {
        if (affix.size() > window.size()) continue;
        if (prefix ? window.substr(0, affix.size()) == affix
                   : window.substr(window.size() - affix.size()) == affix) {
            return Value::boolean(true);
        }
    }
    return Value::boolean(false);
}

Value str_startswith(Renderer&, const Value& self, CallArgs& args) {
    return str_affix(self, args, true);
}
Value str_endswith(Renderer&, const Value& self, CallArgs& args) {
    return str_affix(self, args, false);
}

Value string_list(std::vector<std::string> parts, bool safe) {
    ValueList items;
    items.reserve(parts.size());
    for (auto& part : parts) items.push_back(Value::string(std::move(part), safe));
    return Value::list(std::move(items));
}

Value str_split(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("split", args, {"sep", "maxsplit"});
    return string_list(py_split(text_of(self), bound.string_or_none(0), bound.integer(1, -1)),
                       self.is_safe());
}

Value str_rsplit(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("rsplit", args, {"sep", "maxsplit"});
    return string_list(py_rsplit(text_of(self), bound.string_or_none(0), bound.integer(1, -1)),
                       self.is_safe());
}

Value str_splitlines(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("splitlines", args, {"keepends"});
    return string_list(py_splitlines(text_of(self), bound.flag(0, false)), self.is_safe());
}

Value strip_with(const Value& self, CallArgs& args, StripSide side, const char* name) {
    BoundArgs bound(name, args, {"chars"});
    return Value::string(py_strip(text_of(self), bound.string_or_none(0), side), self.is_safe());
}

Value str_strip(Renderer&, const Value& self, CallArgs& args) {
    return strip_with(self, args, StripSide::Both, "strip");
}
Value str_lstrip(Renderer&, const Value& self, CallArgs& args) {
    return strip_with(self, args, StripSide::Left, "lstrip");
}
Value str_rstrip(Renderer&, const Value& self, CallArgs& args) {
    return strip_with(self, args, StripSide::Right, "rstrip");
}

Value str_replace(Renderer& renderer, const Value& self, CallArgs& args) {
    BoundArgs bound("replace", args, {"old", "new", "count"}, 2);
    if (!bound.get(0).is_string() || !bound.get(1).is_string())
        throw_invalid("replace() arguments must be str");
    const auto& old_text = bound.get(0).as_string();
    const auto& new_text = bound.get(1).as_string();
    std::string out = py_replace(text_of(self), old_text, new_text, bound.integer(2, -1));
    check_string_size(out.size(), renderer.limits());
    return Value::string(std::move(out), self.is_safe());
}

template <std::string (*kTransform)(std::string_view)>
Value str_transform(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("str method", args);
    return Value::string(kTransform(text_of(self)), self.is_safe());
}

std::optional<size_t> find_in(const Value& self, CallArgs& args, const char* name, bool reverse) {
    BoundArgs bound(name, args, {"sub", "start", "end"}, 1);
    if (!bound.get(0).is_string())
        throw_invalid(std::string("must be str, not ") + bound.get(0).type_name());
    const auto& text = text_of(self);
    const auto& sub = bound.get(0).as_string();
    auto [begin, end] = byte_range(text, bound, 1);
    if (sub.size() > end - begin) return std::nullopt;
    std::string_view window = std::string_view(text).substr(begin, end - begin);
    size_t found = reverse ? window.rfind(sub) : window.find(sub);
    if (found == std::string_view::npos) return std::nullopt;
    return count_code_points(std::string_view(text).substr(0, begin + found));
}

Value str_find(Renderer&, const Value& self, CallArgs& args) {
    auto found = find_in(self, args, "find", false);
    return Value::integer(found ? static_cast<int64_t>(*found) : -1);
}

Value str_rfind(Renderer&, const Value& self, CallArgs& args) {
    auto found = find_in(self, args, "rfind", true);
    return Value::integer(found ? static_cast<int64_t>(*found) : -1);
}

Value str_index(Renderer&, const Value& self, CallArgs& args) {
    auto found = find_in(self, args, "index", false);
    if (!found) throw_invalid("substring not found");
    return Value::integer(static_cast<int64_t>(*found));
}

Value str_rindex(Renderer&, const Value& self, CallArgs& args) {
    auto found = find_in(self, args, "rindex", true);
    if (!found) throw_invalid("substring not found");
    return Value::integer(static_cast<int64_t>(*found));
}

Value str_count(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("count", args, {"sub", "start", "end"}, 1);
    if (!bound.get(0).is_string())
        throw_invalid(std::string("must be str, not ") + bound.get(0).type_name());
    const auto& text = text_of(self);
    const auto& sub = bound.get(0).as_string();
    auto [begin, end] = byte_range(text, bound, 1);
    std::string_view window = std::string_view(text).substr(begin, end - begin);
    if (sub.empty()) return Value::integer(static_cast<int64_t>(count_code_points(window)) + 1);
    int64_t count = 0;
    for (size_t pos = window.find(sub); pos != std::string_view::npos;
         pos = window.find(sub, pos + sub.size()))
        ++count;
    return Value::integer(count);
}

Value str_join(Renderer& renderer, const Value& self, CallArgs& args) {
    BoundArgs bound("join", args, {"iterable"}, 1);
    std::string out;
    size_t index = 0;
    bool safe = self.is_safe();
    for (const auto& item : iterate(bound.get(0))) {
        if (!item.is_string()) {
            throw_invalid("sequence item " + std::to_string(index) + ": expected str instance, " +
                          item.type_name() + " found");
        }
        if (index++ > 0) out += text_of(self);
        out += safe && !item.is_safe() ? escape_html(item.as_string()) : item.as_string();
        check_string_size(out.size(), renderer.limits());
    }
    return Value::string(std::move(out), safe);
}

Value str_format(Renderer& renderer, const Value& self, CallArgs& args) {
    std::string out = brace_format(text_of(self), args, renderer.limits());
    check_string_size(out.size(), renderer.limits());
    return Value::string(std::move(out));
}

Value pad_with(Renderer& renderer, const Value& self, CallArgs& args, char align,
               const char* name) {
    BoundArgs bound(name, args, {"width", "fillchar"}, 1);
    int64_t width = bound.integer(0, 0);
    std::string fill = bound.string(1, " ");
    if (count_code_points(fill) != 1)
        throw_invalid("The fill character must be exactly one character long");
    check_string_size(static_cast<size_t>(std::max<int64_t>(width, 0)) * fill.size(),
                      renderer.limits());
    const auto& text = text_of(self);
    auto n = static_cast<int64_t>(count_code_points(text));
    if (width <= n) return self;
    int64_t margin = width - n;
    int64_t left = align == '<' ? 0 : (align == '>' ? margin : margin / 2 + (margin & width & 1));
    std::string out;
    for (int64_t step = 0; step < left; ++step) out += fill;
    out += text;
    for (int64_t step = left; step < margin; ++step) out += fill;
    return Value::string(std::move(out), self.is_safe());
}

Value str_center(Renderer& r, const Value& self, CallArgs& args) {
    return pad_with(r, self, args, '^', "center");
}
Value str_ljust(Renderer& r, const Value& self, CallArgs& args) {
    return pad_with(r, self, args, '<', "ljust");
}
Value str_rjust(Renderer& r, const Value& self, CallArgs& args) {
    return pad_with(r, self, args, '>', "rjust");
}

Value str_zfill(Renderer& renderer, const Value& self, CallArgs& args) {
    BoundArgs bound("zfill", args, {"width"}, 1);
    int64_t width = bound.integer(0, 0);
    check_string_size(static_cast<size_t>(std::max<int64_t>(width, 0)), renderer.limits());
    std::string text = text_of(self);
    auto n = static_cast<int64_t>(count_code_points(text));
    if (width <= n) return self;
    size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
    text.insert(sign, static_cast<size_t>(width - n), '0');
    return Value::string(std::move(text));
}

Value partition(const Value& self, CallArgs& args, bool from_right) {
    BoundArgs bound(from_right ? "rpartition" : "partition", args, {"sep"}, 1);
    if (!bound.get(0).is_string()) throw_invalid("must be str, not " + bound.get(0).type_name());
    const auto& separator = bound.get(0).as_string();
    if (separator.empty()) throw_invalid("empty separator");
    const auto& text = text_of(self);
    size_t found = from_right ? text.rfind(separator) : text.find(separator);
    if (found == std::string::npos) {
        return from_right ? Value::tuple({Value::string(""), Value::string(""), self})
                          : Value::tuple({self, Value::string(""), Value::string("")});
    }
    return Value::tuple({Value::string(text.substr(0, found)), Value::string(separator),
                         Value::string(text.substr(found + separator.size()))});
}

Value str_partition(Renderer&, const Value& self, CallArgs& args) {
    return partition(self, args, false);
}
Value str_rpartition(Renderer&, const Value& self, CallArgs& args) {
    return partition(self, args, true);
}

Value str_removeprefix(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("removeprefix", args, {"prefix"}, 1);
    std::string affix = bound.string(0, "");
    const auto& text = text_of(self);
    if (text.compare(0, affix.size(), affix) != 0) return self;
    return Value::string(text.substr(affix.size()), self.is_safe());
}

Value str_removesuffix(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("removesuffix", args, {"suffix"}, 1);
    std::string affix = bound.string(0, "");
    const auto& text = text_of(self);
    if (affix.empty() || affix.size() > text.size() ||
        text.compare(text.size() - affix.size(), affix.size(), affix) != 0) {
        return self;
    }
    return Value::string(text.substr(0, text.size() - affix.size()), self.is_safe());
}

Value str_expandtabs(Renderer& renderer, const Value& self, CallArgs& args) {
    BoundArgs bound("expandtabs", args, {"tabsize"});
    int64_t tab_size = bound.integer(0, 8);
    std::string out;
    int64_t column = 0;
    for (char32_t c : decode_utf8(text_of(self))) {
        if (c == '\t') {
            if (tab_size > 0) {
                int64_t n = tab_size - column % tab_size;
                check_string_size(out.size() + static_cast<size_t>(n), renderer.limits());
                out.append(static_cast<size_t>(n), ' ');
                column += n;
            }
            continue;
        }
        append_utf8(out, c);
        column = c == '\n' || c == '\r' ? 0 : column + 1;
    }
    return Value::string(std::move(out));
}

// str.isX(): non-empty and every character in the class.
template <bool (*kClass)(char32_t)>
Value str_is(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("str method", args);
    auto code_points = decode_utf8(text_of(self));
    return Value::boolean(!code_points.empty() &&
                          std::all_of(code_points.begin(), code_points.end(), kClass));
}

bool is_alnum_char(char32_t c) {
    return is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c);
}

Value str_isascii(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("isascii", args);
    const auto& text = text_of(self);
    return Value::boolean(std::all_of(text.begin(), text.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
}

Value str_isprintable(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("isprintable", args);
    auto code_points = decode_utf8(text_of(self));
    return Value::boolean(std::all_of(code_points.begin(), code_points.end(), is_printable));
}

Value str_case_test(const Value& self, bool lower) {
    bool any_cased = false;
    for (char32_t c : decode_utf8(text_of(self))) {
        if (!is_cased(c)) continue;
        if (lower ? !is_lower(c) : !is_upper(c)) return Value::boolean(false);
        any_cased = true;
    }
    return Value::boolean(any_cased);
}

Value str_islower(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("islower", args);
    return str_case_test(self, true);
}

Value str_isupper(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("isupper", args);
    return str_case_test(self, false);
}

Value str_istitle(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("istitle", args);
    bool previous_cased = false;
    bool any_cased = false;
    for (char32_t c : decode_utf8(text_of(self))) {
        if (is_upper(c) || (is_cased(c) && !is_lower(c))) {
            if (previous_cased) return Value::boolean(false);
            previous_cased = any_cased = true;
        } else if (is_lower(c)) {
            if (!previous_cased) return Value::boolean(false);
            previous_cased = any_cased = true;
        } else {
            previous_cased = false;
        }
    }
    return Value::boolean(any_cased);
}

Value str_isidentifier(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("isidentifier", args);
    auto code_points = decode_utf8(text_of(self));
    if (code_points.empty() || !(code_points[0] == '_' || is_alpha(code_points[0])))
        return Value::boolean(false);
    return Value::boolean(std::all_of(code_points.begin(), code_points.end(), is_word_char));
}

}  // namespace

const MethodTable& string_methods() {
    static const MethodTable kMethods = {
        {"startswith", str_startswith},
        {"endswith", str_endswith},
        {"split", str_split},
        {"rsplit", str_rsplit},
        {"splitlines", str_splitlines},
        {"strip", str_strip},
        {"lstrip", str_lstrip},
        {"rstrip", str_rstrip},
        {"replace", str_replace},
        {"upper", str_transform<py_upper>},
        {"lower", str_transform<py_lower>},
        {"casefold", str_transform<py_lower>},
        {"title", str_transform<py_title>},
        {"capitalize", str_transform<py_capitalize>},
        {"swapcase", str_transform<py_swapcase>},
        {"find", str_find},
        {"rfind", str_rfind},
        {"index", str_index},
        {"rindex", str_rindex},
        {"count", str_count},
        {"join", str_join},
        {"format", str_format},
        {"center", str_center},
        {"ljust", str_ljust},
        {"rjust", str_rjust},
        {"zfill", str_zfill},
        {"partition", str_partition},
        {"rpartition", str_rpartition},
        {"removeprefix", str_removeprefix},
        {"removesuffix", str_removesuffix},
        {"expandtabs", str_expandtabs},
        {"isalpha", str_is<is_alpha>},
        {"isdigit", str_is<is_digit>},
        {"isdecimal", str_is<is_decimal>},
        {"isnumeric", str_is<is_numeric>},
        {"isalnum", str_is<is_alnum_char>},
        {"isspace", str_is<is_space>},
        {"islower", str_islower},
        {"isupper", str_isupper},
        {"istitle", str_istitle},
        {"isascii", str_isascii},
        {"isidentifier", str_isidentifier},
        {"isprintable", str_isprintable},
    };
    return kMethods;
}

}  // namespace cherenkov::text::jinja
