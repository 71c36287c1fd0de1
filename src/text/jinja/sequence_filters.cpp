// Sequence and mapping filters, following jinja2/filters.py (make_attrgetter, ignore_case,
// prepare_map, prepare_select_or_reject, do_sort, do_unique, ...).
#include "text/jinja/sequence_filters.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/lookup.h"
#include "text/jinja/methods.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_text.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

namespace {

Value ignore_case(const Value& value) {
    if (!value.is_string()) return value;
    return Value::string(py_lower(value.as_string()));
}

// Jinja2's make_attrgetter: a dotted path of items ("a.b.0"), an optional default for an
// undefined step, and lower-casing for case-insensitive comparisons.
class AttributeGetter {
public:
    AttributeGetter(const Value& attribute, bool lower_strings,
                    std::optional<Value> fallback = std::nullopt)
        : lower_strings_(lower_strings), fallback_(std::move(fallback)) {
        if (attribute.is_none() || attribute.is_undefined()) return;
        if (!attribute.is_string()) {
            parts_.push_back(attribute);
            return;
        }
        for (const auto& part : py_split(attribute.as_string(), std::string("."), -1)) {
            bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
            parts_.push_back(digits && part.size() < 19 ? Value::integer(std::stoll(part))
                                                        : Value::string(part));
        }
    }

    Value operator()(const Value& item) const {
        Value current = item;
        for (const auto& part : parts_) {
            current = get_item(current, part);
            if (fallback_ && current.is_undefined()) current = *fallback_;
        }
        return lower_strings_ ? ignore_case(current) : current;
    }

private:
    std::vector<Value> parts_;
    bool lower_strings_;
    std::optional<Value> fallback_;
};

// make_multi_attrgetter: "a,b" sorts by a list of attributes.
Value multi_key(const Value& attribute, bool lower_strings, const Value& item) {
    if (!attribute.is_string() || attribute.as_string().find(',') == std::string::npos) {
        return AttributeGetter(attribute, lower_strings)(item);
    }
    ValueList keys;
    for (const auto& part : py_split(attribute.as_string(), std::string(","), -1)) {
        keys.push_back(AttributeGetter(Value::string(part), lower_strings)(item));
    }
    return Value::list(std::move(keys));
}

// A text that equal scalars share (Python: 1 == 1.0 == True), for set membership.
std::optional<std::string> hash_text(const Value& value) {
    if (value.is_string()) return "s" + value.as_string();
    if (value.is_none()) return std::string("none");
    if (value.is_integral()) return "n" + std::to_string(value.as_int());
    if (value.is_float()) {
        double number = value.as_float();
        if (number == std::trunc(number) && std::fabs(number) < 9.2e18) {
            return "n" + std::to_string(static_cast<int64_t>(number));
        }
        return "f" + repr_float(number);
    }
    return std::nullopt;
}

Value generator(ValueList items) {
    return Value::view(ViewKind::Generator, std::move(items));
}

// The filter or test call a select/map filter applies to each item.
struct ItemCall {
    std::string name;
    CallArgs args;
};

ItemCall take_call(CallArgs& args, size_t offset) {
    ItemCall call;
    call.name = to_str(args.positional[offset]);
    call.args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1,
                                args.positional.end());
    call.args.keywords = args.keywords;
    return call;
}

Value select_or_reject(Renderer& renderer, const Value& value, CallArgs& args, bool select,
                       bool by_attribute) {
    std::optional<AttributeGetter> getter;
    size_t offset = 0;
    if (by_attribute) {
        if (args.positional.empty()) throw_invalid("Missing parameter for attribute name");
        getter.emplace(args.positional[0], false);
        offset = 1;
    }
    std::optional<ItemCall> test;
    if (args.positional.size() > offset) test = take_call(args, offset);
    ValueList kept;
    for (const auto& item : iterate(value)) {
        renderer.count_step();
        Value subject = getter ? (*getter)(item) : item;
        bool verdict = subject.truthy();
        if (test) {
            CallArgs call_args = test->args;
            verdict = renderer.apply_test(test->name, subject, call_args);
        }
        if (verdict == select) kept.push_back(item);
    }
    return generator(std::move(kept));
}

Value min_or_max(Renderer& renderer, const Value& value, CallArgs& args, bool want_max) {
    BoundArgs bound(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
    ValueList items = iterate(value);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    AttributeGetter key(bound.get(1, Value::none()), !bound.flag(0, false));
    size_t best = 0;
    Value best_key = key(items[0]);
    for (size_t index = 1; index < items.size(); ++index) {
        renderer.count_step();
        Value candidate = key(items[index]);
        if (want_max ? less_than(best_key, candidate) : less_than(candidate, best_key)) {
            best = index;
            best_key = std::move(candidate);
        }
    }
    return items[best];
}

}  // namespace

Value filter_attr(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("attr", args, {"name"}, 1);
    std::string name = to_str(bound.get(0));
    if (value.is_undefined()) fail_undefined(value);
    if (name.size() > 1 && name[0] == '_' && name[1] == '_') return get_attribute(value, name);
    // Python getattr only: methods and object attributes, never dict items.
    if (value.is_object()) {
        if (auto found = value.as_object()->attribute(name)) return *found;
    } else if (auto method = builtin_attribute(value, name)) {
        return *method;
    }
    return missing_attribute(value, name);
}

Value filter_batch(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("batch", args, {"linecount", "fill_with"}, 1);
    int64_t line_count = bound.integer(0, 1);
    if (line_count <= 0) throw_invalid("batch linecount must be positive");
    ValueList batches;
    ValueList current;
    for (const auto& item : iterate(value)) {
        renderer.count_step();
        if (static_cast<int64_t>(current.size()) == line_count) {
            batches.push_back(Value::list(std::move(current)));
            current.clear();
        }
        current.push_back(item);
    }
    if (!current.empty()) {
        if (bound.has(1) && !bound.get(1).is_none()) {
            while (static_cast<int64_t>(current.size()) < line_count)
                current.push_back(bound.get(1));
        }
        batches.push_back(Value::list(std::move(current)));
    }
    return generator(std::move(batches));
}

Value filter_dictsort(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("dictsort", args, {"case_sensitive", "by", "reverse"});
    std::string by = bound.string(1, "key");
    if (by != "key" && by != "value")
        throw_invalid("You can only sort by either \"key\" or \"value\"");
    if (!value.is_dict())
        throw_invalid("'" + value.type_name() + "' object has no attribute 'items'");
    size_t position = by == "key" ? 0 : 1;
    bool lower = !bound.flag(0, false);
    bool reverse = bound.flag(2, false);
    std::vector<std::pair<Value, Value>> keyed;
    for (const auto& [key, item] : value.as_dict().items()) {
        Value sort_key = position == 0 ? key : item;
        keyed.emplace_back(lower ? ignore_case(sort_key) : sort_key, Value::tuple({key, item}));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
    });
    ValueList out;
    for (auto& [key, pair] : keyed) out.push_back(std::move(pair));
    return Value::list(std::move(out));
}

Value filter_first(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("first", args);
    ValueList items = iterate(value);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value filter_items(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("items", args);
    if (value.is_undefined()) return generator({});
    if (!value.is_dict()) throw_invalid("Can only get item pairs from a mapping.");
    ValueList pairs;
    for (const auto& [key, item] : value.as_dict().items())
        pairs.push_back(Value::tuple({key, item}));
    return generator(std::move(pairs));
}

Value filter_join(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("join", args, {"d", "attribute"});
    std::string separator = bound.has(0) ? to_str(bound.get(0)) : "";
    std::optional<AttributeGetter> getter;
    if (bound.has(1) && !bound.get(1).is_none()) getter.emplace(bound.get(1), false);
    std::string out;
    bool first = true;
    for (const auto& item : iterate(value)) {
        if (!first) out += separator;
        first = false;
        out += to_str(getter ? (*getter)(item) : item);
        check_string_size(out.size(), renderer.limits());
    }
    return Value::string(std::move(out));
}

Value filter_last(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("last", args);
    if (value.is_view() && value.view_kind() == ViewKind::Generator) {
        throw_invalid("'generator' object is not reversible");
    }
    ValueList items = iterate(value);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value filter_length(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("length", args);
    return Value::integer(static_cast<int64_t>(length(value)));
}

Value filter_list(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("list", args);
    return Value::list(iterate(value));
}

Value filter_map(Renderer& renderer, const Value& value, CallArgs& args) {
    ValueList out;
    if (args.positional.empty()) {
        auto attribute =
            std::find_if(args.keywords.begin(), args.keywords.end(),
                         [](const auto& keyword) { return keyword.first == "attribute"; });
        if (attribute == args.keywords.end()) throw_invalid("map requires a filter argument");
        std::optional<Value> fallback;
        for (const auto& [name, arg] : args.keywords) {
            if (name == "default") {
                if (!arg.is_none()) fallback = arg;
            } else if (name != "attribute") {
                throw_invalid("Unexpected keyword argument '" + name + "'");
            }
        }
        AttributeGetter getter(attribute->second, false, fallback);
        for (const auto& item : iterate(value)) {
            renderer.count_step();
            out.push_back(getter(item));
        }
        return generator(std::move(out));
    }
    ItemCall call = take_call(args, 0);
    for (const auto& item : iterate(value)) {
        CallArgs call_args = call.args;
        out.push_back(renderer.apply_filter(call.name, item, call_args));
    }
    return generator(std::move(out));
}

Value filter_max(Renderer& renderer, const Value& value, CallArgs& args) {
    return min_or_max(renderer, value, args, true);
}

Value filter_min(Renderer& renderer, const Value& value, CallArgs& args) {
    return min_or_max(renderer, value, args, false);
}

Value filter_reject(Renderer& renderer, const Value& value, CallArgs& args) {
    return select_or_reject(renderer, value, args, false, false);
}

Value filter_rejectattr(Renderer& renderer, const Value& value, CallArgs& args) {
    return select_or_reject(renderer, value, args, false, true);
}

Value filter_select(Renderer& renderer, const Value& value, CallArgs& args) {
    return select_or_reject(renderer, value, args, true, false);
}

Value filter_selectattr(Renderer& renderer, const Value& value, CallArgs& args) {
    return select_or_reject(renderer, value, args, true, true);
}

Value filter_reverse(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("reverse", args);
    if (value.is_string()) {
        auto code_points = decode_utf8(value.as_string());
        std::reverse(code_points.begin(), code_points.end());
        return Value::string(encode_utf8(code_points), value.is_safe());
    }
    ValueList items = iterate(value);
    std::reverse(items.begin(), items.end());
    // reversed() gives an iterator for sequences and dicts; generators are listed first.
    if (value.is_view() && value.view_kind() == ViewKind::Generator)
        return Value::list(std::move(items));
    return generator(std::move(items));
}

Value filter_slice(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("slice", args, {"slices", "fill_with"}, 1);
    int64_t n_slices = bound.integer(0, 1);
    if (n_slices <= 0) throw_invalid("slice count must be positive");
    if (n_slices > (int64_t{1} << 20)) throw_invalid("too many slices");
    ValueList items = iterate(value);
    auto n = static_cast<int64_t>(items.size());
    int64_t per_slice = n / n_slices;
    int64_t with_extra = n % n_slices;
    int64_t offset = 0;
    ValueList slices;
    for (int64_t slice = 0; slice < n_slices; ++slice) {
        int64_t start = offset + slice * per_slice;
        if (slice < with_extra) ++offset;
        int64_t end = offset + (slice + 1) * per_slice;
        ValueList part(items.begin() + start, items.begin() + end);
        if (bound.has(1) && !bound.get(1).is_none() && slice >= with_extra)
            part.push_back(bound.get(1));
        slices.push_back(Value::list(std::move(part)));
    }
    return generator(std::move(slices));
}

Value filter_sort(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("sort", args, {"reverse", "case_sensitive", "attribute"});
    bool reverse = bound.flag(0, false);
    bool lower = !bound.flag(1, false);
    Value attribute = bound.get(2, Value::none());
    std::vector<std::pair<Value, Value>> keyed;
    for (const auto& item : iterate(value))
        keyed.emplace_back(multi_key(attribute, lower, item), item);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
    });
    ValueList out;
    for (auto& [key, item] : keyed) out.push_back(std::move(item));
    return Value::list(std::move(out));
}

Value filter_sum(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("sum", args, {"attribute", "start"});
    Value total = bound.get(1, Value::integer(0));
    if (total.is_string()) throw_invalid("sum() can't sum strings [use ''.join(seq) instead]");
    std::optional<AttributeGetter> getter;
    if (bound.has(0) && !bound.get(0).is_none()) getter.emplace(bound.get(0), false);
    for (const auto& item : iterate(value)) {
        renderer.count_step();
        total =
            apply_binary(BinaryOp::Add, total, getter ? (*getter)(item) : item, renderer.limits());
    }
    return total;
}

Value filter_unique(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("unique", args, {"case_sensitive", "attribute"});
    AttributeGetter key(bound.get(1, Value::none()), !bound.flag(0, false));
    std::unordered_set<std::string> seen_scalars;
    ValueList seen_others;
    ValueList out;
    for (const auto& item : iterate(value)) {
        renderer.count_step();
        Value item_key = key(item);
        require_hashable(item_key);
        if (auto text = hash_text(item_key)) {
            if (!seen_scalars.insert(*text).second) continue;
        } else {
            bool duplicate =
                std::any_of(seen_others.begin(), seen_others.end(),
                            [&](const Value& other) { return values_equal(other, item_key); });
            if (duplicate) continue;
            seen_others.push_back(std::move(item_key));
        }
        out.push_back(item);
    }
    return generator(std::move(out));
}

}  // namespace cherenkov::text::jinja
