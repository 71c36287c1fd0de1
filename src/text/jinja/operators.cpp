// Arithmetic, comparison and containment with CPython's semantics and error messages.
#include "text/jinja/operators.h"

#include <cmath>

#include "base/error.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

const char* op_symbol(BinaryOp op) {
    switch (op) {
        case BinaryOp::Add: return "+";
        case BinaryOp::Sub: return "-";
        case BinaryOp::Mul: return "*";
        case BinaryOp::Div: return "/";
        case BinaryOp::FloorDiv: return "//";
        case BinaryOp::Mod: return "%";
        case BinaryOp::Pow: return "** or pow()";
    }
    return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& left, const Value& right) {
    if (op == BinaryOp::Add && left.is_string()) {
        throw_invalid("can only concatenate str (not \"" + right.type_name() + "\") to str");
    }
    if (op == BinaryOp::Add && left.is_list()) {
        throw_invalid("can only concatenate " + left.type_name() + " (not \"" + right.type_name() +
                      "\") to " + left.type_name());
    }
    throw_invalid(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" +
                  left.type_name() + "' and '" + right.type_name() + "'");
}

[[noreturn]] void overflow() {
    throw_invalid("integer overflow: result does not fit in 64 bits");
}

int64_t int_pow(int64_t base, int64_t exponent) {
    int64_t result = 1;
    while (exponent > 0) {
        if (exponent & 1) {
            if (__builtin_mul_overflow(result, base, &result)) overflow();
        }
        exponent >>= 1;
        if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return result;
}

// CPython's float_divmod.
void float_divmod(double a, double b, double& floor_div, double& mod) {
    mod = std::fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, b);
    }
    if (div != 0.0) {
        floor_div = std::floor(div);
        if (div - floor_div > 0.5) floor_div += 1.0;
    } else {
        floor_div = std::copysign(0.0, a / b);
    }
}

Value int_arithmetic(BinaryOp op, int64_t a, int64_t b) {
    int64_t result = 0;
    switch (op) {
        case BinaryOp::Add:
            if (__builtin_add_overflow(a, b, &result)) overflow();
            return Value::integer(result);
        case BinaryOp::Sub:
            if (__builtin_sub_overflow(a, b, &result)) overflow();
            return Value::integer(result);
        case BinaryOp::Mul:
            if (__builtin_mul_overflow(a, b, &result)) overflow();
            return Value::integer(result);
        case BinaryOp::Div:
            if (b == 0) throw_invalid("division by zero");
            return Value::floating(static_cast<double>(a) / static_cast<double>(b));
        case BinaryOp::FloorDiv:
        case BinaryOp::Mod: {
            if (b == 0) throw_invalid("integer division or modulo by zero");
            if (a == INT64_MIN && b == -1) {
                if (op == BinaryOp::Mod) return Value::integer(0);
                overflow();
            }
            int64_t quotient = a / b;
            int64_t remainder = a % b;
            if (remainder != 0 && ((remainder < 0) != (b < 0))) {
                quotient -= 1;
                remainder += b;
            }
            return Value::integer(op == BinaryOp::Mod ? remainder : quotient);
        }
        case BinaryOp::Pow:
            if (b < 0) {
                if (a == 0) throw_invalid("0.0 cannot be raised to a negative power");
                return Value::floating(std::pow(static_cast<double>(a), static_cast<double>(b)));
            }
            return Value::integer(int_pow(a, b));
    }
    return Value::none();
}

Value float_arithmetic(BinaryOp op, double a, double b) {
    switch (op) {
        case BinaryOp::Add: return Value::floating(a + b);
        case BinaryOp::Sub: return Value::floating(a - b);
        case BinaryOp::Mul: return Value::floating(a * b);
        case BinaryOp::Div:
            if (b == 0.0) throw_invalid("float division by zero");
            return Value::floating(a / b);
        case BinaryOp::FloorDiv:
        case BinaryOp::Mod: {
            if (b == 0.0) {
                throw_invalid(op == BinaryOp::Mod ? "float modulo"
                                                  : "float floor division by zero");
            }
            double floor_div = 0;
            double mod = 0;
            float_divmod(a, b, floor_div, mod);
            return Value::floating(op == BinaryOp::Mod ? mod : floor_div);
        }
        case BinaryOp::Pow:
            if (a == 0.0 && b < 0) throw_invalid("0.0 cannot be raised to a negative power");
            if (a < 0 && b != std::floor(b)) {
                throw_invalid("a negative number raised to a fractional power is complex");
            }
            return Value::floating(std::pow(a, b));
    }
    return Value::none();
}

Value repeat(const Value& sequence, int64_t count, const RenderLimits& limits) {
    if (count < 0) count = 0;
    if (sequence.is_string()) {
        const auto& text = sequence.as_string();
        if (!text.empty() && static_cast<uint64_t>(count) > limits.max_string_bytes / text.size()) {
            check_string_size(limits.max_string_bytes + 1, limits);
        }
        std::string out;
        out.reserve(text.size() * static_cast<size_t>(count));
        for (int64_t step = 0; step < count; ++step) out += text;
        return Value::string(std::move(out), sequence.is_safe());
    }
    const auto& items = sequence.as_list();
    if (!items.empty() && static_cast<uint64_t>(count) > limits.max_list_items / items.size()) {
        check_list_size(limits.max_list_items + 1, limits);
    }
    ValueList out;
    out.reserve(items.size() * static_cast<size_t>(count));
    for (int64_t step = 0; step < count; ++step) out.insert(out.end(), items.begin(), items.end());
    return sequence.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add_strings(const Value& left, const Value& right, const RenderLimits& limits) {
    bool safe = left.is_safe() || right.is_safe();
    std::string a = safe && !left.is_safe() ? escape_html(left.as_string()) : left.as_string();
    const std::string& b_raw = right.as_string();
    check_string_size(a.size() + b_raw.size(), limits);
    if (safe && !right.is_safe()) return Value::string(a + escape_html(b_raw), true);
    return Value::string(a + b_raw, safe);
}

Value add_lists(const Value& left, const Value& right, const RenderLimits& limits) {
    if (left.is_tuple() != right.is_tuple()) unsupported(BinaryOp::Add, left, right);
    check_list_size(left.as_list().size() + right.as_list().size(), limits);
    ValueList out = left.as_list();
    out.insert(out.end(), right.as_list().begin(), right.as_list().end());
    return left.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python ordering of two numbers; false when either is NaN.
bool number_less(const Value& a, const Value& b) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    if (a.is_float() && b.is_float()) return a.as_float() < b.as_float();
    if (a.is_float()) {
        double x = a.as_float();
        int64_t y = b.as_int();
        if (std::isnan(x)) return false;
        if (x >= 9223372036854775808.0) return false;
        if (x < -9223372036854775808.0) return true;
        double whole = std::floor(x);
        return static_cast<int64_t>(whole) < y;
    }
    int64_t x = a.as_int();
    double y = b.as_float();
    if (std::isnan(y)) return false;
    if (y >= 9223372036854775808.0) return true;
    if (y < -9223372036854775808.0) return false;
    double whole = std::ceil(y);
    return x < static_cast<int64_t>(whole);
}

[[noreturn]] void unorderable(const char* symbol, const Value& left, const Value& right) {
    throw_invalid(std::string("'") + symbol + "' not supported between instances of '" +
                  left.type_name() + "' and '" + right.type_name() + "'");
}

bool ordered(CompareOp op, const Value& left, const Value& right);

bool lists_ordered(CompareOp op, const Value& left, const Value& right) {
    const auto& a = left.as_list();
    const auto& b = right.as_list();
    size_t n = std::min(a.size(), b.size());
    for (size_t index = 0; index < n; ++index) {
        if (!values_equal(a[index], b[index])) return ordered(op, a[index], b[index]);
    }
    switch (op) {
        case CompareOp::Lt: return a.size() < b.size();
        case CompareOp::Le: return a.size() <= b.size();
        case CompareOp::Gt: return a.size() > b.size();
        default: return a.size() >= b.size();
    }
}

const char* compare_symbol(CompareOp op) {
    switch (op) {
        case CompareOp::Lt: return "<";
        case CompareOp::Le: return "<=";
        case CompareOp::Gt: return ">";
        default: return ">=";
    }
}

bool ordered(CompareOp op, const Value& left, const Value& right) {
    if (left.is_undefined()) fail_undefined(left);
    if (right.is_undefined()) fail_undefined(right);
    if (left.is_number() && right.is_number()) {
        switch (op) {
            case CompareOp::Lt: return number_less(left, right);
            case CompareOp::Gt: return number_less(right, left);
            case CompareOp::Le: return number_less(left, right) || values_equal(left, right);
            default: return number_less(right, left) || values_equal(left, right);
        }
    }
    if (left.is_string() && right.is_string()) {
        int order = left.as_string().compare(right.as_string());
        switch (op) {
            case CompareOp::Lt: return order < 0;
            case CompareOp::Gt: return order > 0;
            case CompareOp::Le: return order <= 0;
            default: return order >= 0;
        }
    }
    if (left.is_list() && right.is_list() && left.is_tuple() == right.is_tuple()) {
        return lists_ordered(op, left, right);
    }
    unorderable(compare_symbol(op), left, right);
}

}  // namespace

Value apply_binary(BinaryOp op, const Value& left, const Value& right, const RenderLimits& limits) {
    if (left.is_undefined()) fail_undefined(left);
    // str % undefined formats (str.__mod__ runs first); every other use of undefined fails.
    if (right.is_undefined() && !(op == BinaryOp::Mod && left.is_string())) fail_undefined(right);
    if (left.is_number() && right.is_number()) {
        if (left.is_float() || right.is_float()) {
            return float_arithmetic(op, left.as_float(), right.as_float());
        }
        return int_arithmetic(op, left.as_int(), right.as_int());
    }
    switch (op) {
        case BinaryOp::Add:
            if (left.is_string() && right.is_string()) return add_strings(left, right, limits);
            if (left.is_list() && right.is_list()) return add_lists(left, right, limits);
            break;
        case BinaryOp::Mul:
            if ((left.is_string() || left.is_list()) && right.is_integral()) {
                return repeat(left, right.as_int(), limits);
            }
            if (left.is_integral() && (right.is_string() || right.is_list())) {
                return repeat(right, left.as_int(), limits);
            }
            break;
        case BinaryOp::Mod:
            if (left.is_string()) {
                std::string out = percent_format(left, right);
                check_string_size(out.size(), limits);
                return Value::string(std::move(out), left.is_safe());
            }
            break;
        default: break;
    }
    unsupported(op, left, right);
}

Value negate(const Value& operand) {
    if (operand.is_undefined()) fail_undefined(operand);
    if (operand.is_float()) return Value::floating(-operand.as_float());
    if (operand.is_integral()) {
        if (operand.as_int() == INT64_MIN) overflow();
        return Value::integer(-operand.as_int());
    }
    throw_invalid("bad operand type for unary -: '" + operand.type_name() + "'");
}

Value unary_plus(const Value& operand) {
    if (operand.is_undefined()) fail_undefined(operand);
    if (operand.is_float()) return operand;
    if (operand.is_integral()) return Value::integer(operand.as_int());
    throw_invalid("bad operand type for unary +: '" + operand.type_name() + "'");
}

bool compare(CompareOp op, const Value& left, const Value& right) {
    switch (op) {
        case CompareOp::Eq: return values_equal(left, right);
        case CompareOp::Ne: return !values_equal(left, right);
        case CompareOp::In: return contains(right, left);
        case CompareOp::NotIn: return !contains(right, left);
        default: return ordered(op, left, right);
    }
}

bool less_than(const Value& left, const Value& right) {
    return ordered(CompareOp::Lt, left, right);
}

bool contains(const Value& container, const Value& item) {
    switch (container.type()) {
        case ValueType::Undefined: return false;
        case ValueType::String:
            if (item.is_undefined()) fail_undefined(item);
            if (!item.is_string()) {
                throw_invalid("'in <string>' requires string as left operand, not " +
                              item.type_name());
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case ValueType::List:
        case ValueType::View:
            for (const auto& element : container.as_list()) {
                if (values_equal(element, item)) return true;
            }
            return false;
        case ValueType::Dict:
            require_hashable(item);
            return container.as_dict().find(item) != nullptr;
        default: throw_invalid("argument of type '" + container.type_name() + "' is not iterable");
    }
}

std::string escape_html(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '\'': out += "&#39;"; break;
            case '"': out += "&#34;"; break;
            default: out += c;
        }
    }
    return out;
}

void check_string_size(size_t n_bytes, const RenderLimits& limits) {
    if (n_bytes > limits.max_string_bytes) {
        throw Error(ErrorKind::ResourceExhausted, "string of " + std::to_string(n_bytes) +
                                                      " bytes exceeds the limit of " +
                                                      std::to_string(limits.max_string_bytes));
    }
}

void check_list_size(size_t n_items, const RenderLimits& limits) {
    if (n_items > limits.max_list_items) {
        throw Error(ErrorKind::ResourceExhausted, "list of " + std::to_string(n_items) +
                                                      " items exceeds the limit of " +
                                                      std::to_string(limits.max_list_items));
    }
}

}  // namespace cherenkov::text::jinja
