// Jinja2's builtin tests (jinja2/tests.py) over interpreter values.
#include "text/jinja/tests.h"

#include <map>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/filters.h"
#include "text/jinja/operators.h"
#include "text/jinja/python_text.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

namespace {

Value modulo(Renderer& renderer, const Value& value, const Value& divisor) {
    return apply_binary(BinaryOp::Mod, value, divisor, renderer.limits());
}

bool test_odd(Renderer& renderer, const Value& value, CallArgs& args) {
    require_no_args("odd", args);
    return values_equal(modulo(renderer, value, Value::integer(2)), Value::integer(1));
}

bool test_even(Renderer& renderer, const Value& value, CallArgs& args) {
    require_no_args("even", args);
    return values_equal(modulo(renderer, value, Value::integer(2)), Value::integer(0));
}

bool test_divisibleby(Renderer& renderer, const Value& value, CallArgs& args) {
    BoundArgs bound("divisibleby", args, {"num"}, 1);
    return values_equal(modulo(renderer, value, bound.get(0)), Value::integer(0));
}

bool test_defined(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("defined", args);
    return !value.is_undefined();
}

bool test_undefined(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("undefined", args);
    return value.is_undefined();
}

bool test_filter(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("filter", args);
    return value.is_string() && find_filter(value.as_string()) != nullptr;
}

bool test_test(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("test", args);
    return value.is_string() && find_test(value.as_string()) != nullptr;
}

bool test_none(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("none", args);
    return value.is_none();
}

bool test_boolean(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("boolean", args);
    return value.is_bool();
}

bool test_false(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("false", args);
    return value.is_bool() && !value.as_bool();
}

bool test_true(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("true", args);
    return value.is_bool() && value.as_bool();
}

bool test_integer(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("integer", args);
    return value.is_int();
}

bool test_float(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("float", args);
    return value.is_float();
}

// str.islower() / str.isupper(): some cased character, and all of them in that case.
bool all_cased_are(const std::string& text, bool lower) {
    bool any_cased = false;
    for (char32_t c : decode_utf8(text)) {
        if (lower ? is_upper(c) : is_lower(c)) return false;
        if (is_cased(c)) {
            if (lower ? !is_lower(c) : !is_upper(c)) return false;
            any_cased = true;
        }
    }
    return any_cased;
}

bool test_lower(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("lower", args);
    return all_cased_are(to_str(value), true);
}

bool test_upper(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("upper", args);
    return all_cased_are(to_str(value), false);
}

bool test_string(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("string", args);
    return value.is_string();
}

bool test_mapping(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("mapping", args);
    return value.is_dict();
}

bool test_number(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("number", args);
    return value.is_number();
}

// len() and __getitem__: str, list, tuple, dict, and Jinja2's Undefined.
bool test_sequence(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("sequence", args);
    return value.is_string() || value.is_list() || value.is_dict() || value.is_undefined();
}

bool test_iterable(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("iterable", args);
    return value.is_string() || value.is_list() || value.is_view() || value.is_dict() ||
           value.is_undefined();
}

// Undefined defines __call__ (to raise), so Python's callable() says yes.
bool test_callable(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("callable", args);
    return value.is_undefined() || (value.is_object() && value.as_object()->is_callable());
}

// Python `is`: singletons and CPython's small-int cache compare by value, the rest by identity.
bool test_sameas(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("sameas", args, {"other"}, 1);
    const Value& other = bound.get(0);
    if (value.type() != other.type()) return false;
    switch (value.type()) {
        case ValueType::None: return true;
        case ValueType::Bool: return value.as_bool() == other.as_bool();
        case ValueType::Int:
            return value.as_int() == other.as_int() && value.as_int() >= -5 &&
                   value.as_int() <= 256;
        case ValueType::Float: return false;
        default: return value.identity() == other.identity();
    }
}

bool test_escaped(Renderer&, const Value& value, CallArgs& args) {
    require_no_args("escaped", args);
    return value.is_safe();
}

bool test_in(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("in", args, {"seq"}, 1);
    return contains(bound.get(0), value);
}

template <CompareOp kOp>
bool test_compare(Renderer&, const Value& value, CallArgs& args) {
    BoundArgs bound("compare", args, {"other"}, 1);
    return compare(kOp, value, bound.get(0));
}

const std::map<std::string, TestFunction, std::less<>>& registry() {
    static const std::map<std::string, TestFunction, std::less<>> kTests = {
        {"odd", test_odd},
        {"even", test_even},
        {"divisibleby", test_divisibleby},
        {"defined", test_defined},
        {"undefined", test_undefined},
        {"filter", test_filter},
        {"test", test_test},
        {"none", test_none},
        {"boolean", test_boolean},
        {"false", test_false},
        {"true", test_true},
        {"integer", test_integer},
        {"float", test_float},
        {"lower", test_lower},
        {"upper", test_upper},
        {"string", test_string},
        {"mapping", test_mapping},
        {"number", test_number},
        {"sequence", test_sequence},
        {"iterable", test_iterable},
        {"callable", test_callable},
        {"sameas", test_sameas},
        {"escaped", test_escaped},
        {"in", test_in},
        {"==", test_compare<CompareOp::Eq>},
        {"eq", test_compare<CompareOp::Eq>},
        {"equalto", test_compare<CompareOp::Eq>},
        {"!=", test_compare<CompareOp::Ne>},
        {"ne", test_compare<CompareOp::Ne>},
        {">", test_compare<CompareOp::Gt>},
        {"gt", test_compare<CompareOp::Gt>},
        {"greaterthan", test_compare<CompareOp::Gt>},
        {">=", test_compare<CompareOp::Ge>},
        {"ge", test_compare<CompareOp::Ge>},
        {"<", test_compare<CompareOp::Lt>},
        {"lt", test_compare<CompareOp::Lt>},
        {"lessthan", test_compare<CompareOp::Lt>},
        {"<=", test_compare<CompareOp::Le>},
        {"le", test_compare<CompareOp::Le>},
    };
    return kTests;
}

}  // namespace

TestFunction find_test(std::string_view name) {
    auto found = registry().find(name);
    return found == registry().end() ? nullptr : found->second;
}

std::string test_problem(std::string_view name, bool at_runtime) {
    if (find_test(name) != nullptr) return "";
    return "No test named '" + std::string(name) + (at_runtime ? "' found." : "'.");
}

}  // namespace cherenkov::text::jinja
