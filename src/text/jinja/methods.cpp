// Attribute lookup on builtin values: list, dict, int and float methods here, str methods in
// string_methods.cpp, and the sandbox's refusals for mutating methods.
#include "text/jinja/methods.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/callables.h"
#include "text/jinja/lookup.h"
#include "text/jinja/method_table.h"
#include "text/jinja/operators.h"

namespace cherenkov::text::jinja {

namespace {

Value list_count(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("count", args, {"value"}, 1);
    const auto& items = self.as_list();
    return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& item) {
        return values_equal(item, bound.get(0));
    }));
}

Value list_index(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("index", args, {"value", "start", "stop"}, 1);
    const auto& items = self.as_list();
    auto n = static_cast<int64_t>(items.size());
    auto clamp = [n](int64_t index) {
        return std::min(index < 0 ? std::max<int64_t>(0, index + n) : index, n);
    };
    for (int64_t index = clamp(bound.integer(1, 0)); index < clamp(bound.integer(2, n)); ++index) {
        if (values_equal(items[static_cast<size_t>(index)], bound.get(0)))
            return Value::integer(index);
    }
    throw_invalid(repr(bound.get(0)) + " is not in " + self.type_name());
}

Value list_copy(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("copy", args);
    return Value::list(self.as_list());
}

Value dict_get(Renderer&, const Value& self, CallArgs& args) {
    BoundArgs bound("get", args, {"key", "default"}, 1);
    require_hashable(bound.get(0));
    if (const Value* found = self.as_dict().find(bound.get(0))) return *found;
    return bound.get(1, Value::none());
}

Value dict_view(const Value& self, CallArgs& args, ViewKind kind) {
    require_no_args("dict method", args);
    ValueList items;
    for (const auto& [key, value] : self.as_dict().items()) {
        if (kind == ViewKind::DictKeys) items.push_back(key);
        if (kind == ViewKind::DictValues) items.push_back(value);
        if (kind == ViewKind::DictItems) items.push_back(Value::tuple({key, value}));
    }
    return Value::view(kind, std::move(items));
}

Value dict_keys(Renderer&, const Value& self, CallArgs& args) {
    return dict_view(self, args, ViewKind::DictKeys);
}
Value dict_values(Renderer&, const Value& self, CallArgs& args) {
    return dict_view(self, args, ViewKind::DictValues);
}
Value dict_items(Renderer&, const Value& self, CallArgs& args) {
    return dict_view(self, args, ViewKind::DictItems);
}

Value dict_copy(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("copy", args);
    return self;
}

Value dict_fromkeys(Renderer&, const Value&, CallArgs& args) {
    BoundArgs bound("fromkeys", args, {"iterable", "value"}, 1);
    Dict out;
    for (const auto& key : iterate(bound.get(0))) out.set(key, bound.get(1, Value::none()));
    return Value::dict(std::move(out));
}

Value int_bit_length(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("bit_length", args);
    uint64_t magnitude = self.as_int() < 0 ? ~static_cast<uint64_t>(self.as_int()) + 1
                                           : static_cast<uint64_t>(self.as_int());
    int64_t bits = 0;
    while (magnitude > 0) {
        ++bits;
        magnitude >>= 1;
    }
    return Value::integer(bits);
}

Value number_conjugate(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("conjugate", args);
    return self.is_float() ? self : Value::integer(self.as_int());
}

Value float_is_integer(Renderer&, const Value& self, CallArgs& args) {
    require_no_args("is_integer", args);
    double number = self.as_float();
    return Value::boolean(std::isfinite(number) && number == std::trunc(number));
}

const MethodTable& list_methods() {
    static const MethodTable kMethods = {
        {"count", list_count}, {"index", list_index}, {"copy", list_copy}};
    return kMethods;
}

const MethodTable& dict_methods() {
    static const MethodTable kMethods = {
        {"get", dict_get},     {"keys", dict_keys}, {"values", dict_values},
        {"items", dict_items}, {"copy", dict_copy}, {"fromkeys", dict_fromkeys},
    };
    return kMethods;
}

const MethodTable& int_methods() {
    static const MethodTable kMethods = {{"bit_length", int_bit_length},
                                         {"conjugate", number_conjugate}};
    return kMethods;
}

const MethodTable& float_methods() {
    static const MethodTable kMethods = {{"is_integer", float_is_integer},
                                         {"conjugate", number_conjugate}};
    return kMethods;
}

Value bind(const Value& self, std::string_view name, Method method) {
    return make_function(std::string(name), [self, method](Renderer& renderer, CallArgs& args) {
        return method(renderer, self, args);
    });
}

// Python attributes this interpreter does not implement: calling them says so.
Value unsupported_method(const Value& self, std::string_view name) {
    std::string qualified = self.type_name() + "." + std::string(name);
    return make_function(std::string(name), [qualified](Renderer&, CallArgs&) -> Value {
        throw_unsupported(qualified + "() is not supported");
    });
}

Value unsafe(const Value& self, std::string_view name) {
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                self.type_name() + "' object is unsafe.",
                            true);
}

std::optional<Value> lookup_in(const MethodTable& table,
                               const std::set<std::string_view>& unsafe_names,
                               const std::set<std::string_view>& unsupported_names,
                               const Value& self, std::string_view name) {
    auto found = table.find(name);
    if (found != table.end()) return bind(self, name, found->second);
    if (unsafe_names.count(name) > 0) return unsafe(self, name);
    if (unsupported_names.count(name) > 0) return unsupported_method(self, name);
    return std::nullopt;
}

}  // namespace

std::optional<Value> builtin_attribute(const Value& self, std::string_view name) {
    static const std::set<std::string_view> kNone;
    static const std::set<std::string_view> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                           "pop",    "remove", "reverse", "sort"};
    static const std::set<std::string_view> kDictUnsafe = {"clear", "pop", "popitem", "setdefault",
                                                           "update"};
    static const std::set<std::string_view> kStrUnsupported = {"encode", "format_map", "maketrans",
                                                               "translate"};
    static const std::set<std::string_view> kIntUnsupported = {"as_integer_ratio", "bit_count",
                                                               "from_bytes", "to_bytes"};
    static const std::set<std::string_view> kFloatUnsupported = {"as_integer_ratio", "fromhex",
                                                                 "hex"};
    switch (self.type()) {
        case ValueType::String:
            return lookup_in(string_methods(), kNone, kStrUnsupported, self, name);
        case ValueType::List:
            if (self.is_tuple()) {
                if (name == "count" || name == "index")
                    return lookup_in(list_methods(), kNone, kNone, self, name);
                return std::nullopt;
            }
            return lookup_in(list_methods(), kListUnsafe, kNone, self, name);
        case ValueType::Dict: return lookup_in(dict_methods(), kDictUnsafe, kNone, self, name);
        case ValueType::Bool:
        case ValueType::Int:
            if (name == "real" || name == "numerator") return Value::integer(self.as_int());
            if (name == "imag") return Value::integer(0);
            if (name == "denominator") return Value::integer(1);
            return lookup_in(int_methods(), kNone, kIntUnsupported, self, name);
        case ValueType::Float:
            if (name == "real") return self;
            if (name == "imag") return Value::floating(0.0);
            return lookup_in(float_methods(), kNone, kFloatUnsupported, self, name);
        default: return std::nullopt;
    }
}

}  // namespace cherenkov::text::jinja
