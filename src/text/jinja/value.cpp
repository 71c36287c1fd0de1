// Value construction, Python truthiness, ==, str() and repr(), and the ordered Dict.
#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "base/error.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

const std::string kEmpty;

void check_depth(int depth) {
    if (depth > kMaxValueDepth) throw_invalid("maximum recursion depth exceeded");
}

// The message of an undefined made without one; shared so that Value() does not allocate.
const std::shared_ptr<const std::string>& default_undefined_message() {
    static const auto message = std::make_shared<const std::string>("undefined value");
    return message;
}

int nesting_of(const ValueList& items) {
    int deepest = 0;
    for (const auto& item : items) deepest = std::max(deepest, item.depth());
    if (deepest + 1 > kMaxValueDepth)
        throw_invalid("value nesting exceeds " + std::to_string(kMaxValueDepth) + " levels");
    return deepest + 1;
}

// Python's exact int == float.
bool int_equals_float(int64_t integer, double floating) {
    if (!std::isfinite(floating) || floating != std::trunc(floating)) return false;
    if (floating < -9223372036854775808.0 || floating >= 9223372036854775808.0) return false;
    return static_cast<int64_t>(floating) == integer;
}

bool equal_at(const Value& left, const Value& right, int depth);

bool lists_equal(const Value& left, const Value& right, int depth) {
    if (left.is_tuple() != right.is_tuple()) return false;
    const auto& a = left.as_list();
    const auto& b = right.as_list();
    if (a.size() != b.size()) return false;
    for (size_t index = 0; index < a.size(); ++index) {
        if (!equal_at(a[index], b[index], depth + 1)) return false;
    }
    return true;
}

bool dicts_equal(const Dict& a, const Dict& b, int depth) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
        const Value* other = b.find(key);
        if (other == nullptr || !equal_at(value, *other, depth + 1)) return false;
    }
    return true;
}

bool equal_at(const Value& left, const Value& right, int depth) {
    check_depth(depth);
    if (left.is_number() && right.is_number()) {
        if (left.is_float() && right.is_float()) return left.as_float() == right.as_float();
        if (left.is_float()) return int_equals_float(right.as_int(), left.as_float());
        if (right.is_float()) return int_equals_float(left.as_int(), right.as_float());
        return left.as_int() == right.as_int();
    }
    if (left.type() != right.type()) return false;
    switch (left.type()) {
        case ValueType::Undefined:
        case ValueType::None: return true;
        case ValueType::String: return left.as_string() == right.as_string();
        case ValueType::List: return lists_equal(left, right, depth);
        case ValueType::Dict: return dicts_equal(left.as_dict(), right.as_dict(), depth);
        case ValueType::Object: return left.as_object() == right.as_object();
        case ValueType::View: return left.identity() == right.identity();
        default: return false;
    }
}

void append_repr(std::string& out, const Value& value, int depth);

void append_str(std::string& out, const Value& value, int depth) {
    check_depth(depth);
    switch (value.type()) {
        case ValueType::Undefined: return;
        case ValueType::None: out += "None"; return;
        case ValueType::Bool: out += value.as_bool() ? "True" : "False"; return;
        case ValueType::Int: out += std::to_string(value.as_int()); return;
        case ValueType::Float: out += repr_float(value.as_float()); return;
        case ValueType::String: out += value.as_string(); return;
        case ValueType::List: {
            const auto& items = value.as_list();
            out += value.is_tuple() ? '(' : '[';
            for (size_t index = 0; index < items.size(); ++index) {
                if (index > 0) out += ", ";
                append_repr(out, items[index], depth + 1);
            }
            if (value.is_tuple() && items.size() == 1) out += ',';
            out += value.is_tuple() ? ')' : ']';
            return;
        }
        case ValueType::Dict: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : value.as_dict().items()) {
                if (!first) out += ", ";
                first = false;
                append_repr(out, key, depth + 1);
                out += ": ";
                append_repr(out, item, depth + 1);
            }
            out += '}';
            return;
        }
        case ValueType::View: {
            if (value.view_kind() == ViewKind::Generator) {
                out += "<generator object>";
                return;
            }
            out += value.type_name() + "([";
            const auto& items = value.as_list();
            for (size_t index = 0; index < items.size(); ++index) {
                if (index > 0) out += ", ";
                append_repr(out, items[index], depth + 1);
            }
            out += "])";
            return;
        }
        case ValueType::Object: out += value.as_object()->repr(depth + 1); return;
    }
}

void append_repr(std::string& out, const Value& value, int depth) {
    if (value.is_string()) {
        if (value.is_safe()) {
            out += "Markup(" + repr_string(value.as_string()) + ")";
        } else {
            out += repr_string(value.as_string());
        }
        return;
    }
    if (value.is_undefined()) {
        out += "Undefined";
        return;
    }
    append_str(out, value, depth);
}

}  // namespace

Value::Value() : ref_(default_undefined_message()) {}

Value Value::undefined(std::string message, bool unsafe) {
    Value value;
    value.flag_ = unsafe ? 1 : 0;
    value.ref_ = std::make_shared<const std::string>(std::move(message));
    return value;
}

Value Value::none() {
    Value value;
    value.type_ = ValueType::None;
    value.ref_ = std::monostate();
    return value;
}

Value Value::boolean(bool flag) {
    Value value = none();
    value.type_ = ValueType::Bool;
    value.scalar_.boolean = flag;
    return value;
}

Value Value::integer(int64_t number) {
    Value value = none();
    value.type_ = ValueType::Int;
    value.scalar_.integer = number;
    return value;
}

Value Value::floating(double number) {
    Value value = none();
    value.type_ = ValueType::Float;
    value.scalar_.floating = number;
    return value;
}

Value Value::string(std::string text, bool safe) {
    Value value;
    value.type_ = ValueType::String;
    value.flag_ = safe ? 1 : 0;
    value.ref_ = std::make_shared<const std::string>(std::move(text));
    return value;
}

Value Value::list(ValueList items) {
    Value value;
    value.type_ = ValueType::List;
    value.depth_ = nesting_of(items);
    value.ref_ = std::make_shared<const ValueList>(std::move(items));
    return value;
}

Value Value::tuple(ValueList items) {
    Value value = list(std::move(items));
    value.flag_ = 1;
    return value;
}

Value Value::view(ViewKind kind, ValueList items) {
    Value value = list(std::move(items));
    value.type_ = ValueType::View;
    value.flag_ = static_cast<uint8_t>(kind);
    return value;
}

Value Value::dict(Dict items) {
    Value value;
    value.type_ = ValueType::Dict;
    value.depth_ = items.depth() + 1;
    if (value.depth_ > kMaxValueDepth) {
        throw_invalid("value nesting exceeds " + std::to_string(kMaxValueDepth) + " levels");
    }
    value.ref_ = std::make_shared<const Dict>(std::move(items));
    return value;
}

Value Value::object(std::shared_ptr<Object> object) {
    Value value;
    value.type_ = ValueType::Object;
    value.ref_ = std::move(object);
    return value;
}

double Value::as_float() const {
    if (is_float()) return scalar_.floating;
    return static_cast<double>(as_int());
}

const std::string& Value::as_string() const {
    return *std::get<std::shared_ptr<const std::string>>(ref_);
}

const ValueList& Value::as_list() const {
    return *std::get<std::shared_ptr<const ValueList>>(ref_);
}

const void* Value::identity() const {
    return std::visit(
        [](const auto& ref) -> const void* {
            if constexpr (std::is_same_v<std::decay_t<decltype(ref)>, std::monostate>) {
                return nullptr;
            } else {
                return ref.get();
            }
        },
        ref_);
}

const Dict& Value::as_dict() const {
    return *std::get<std::shared_ptr<const Dict>>(ref_);
}

const std::shared_ptr<Object>& Value::as_object() const {
    return std::get<std::shared_ptr<Object>>(ref_);
}

const std::string& Value::undefined_message() const {
    if (!is_undefined()) return kEmpty;
    return *std::get<std::shared_ptr<const std::string>>(ref_);
}

bool Value::truthy() const {
    switch (type_) {
        case ValueType::Undefined:
        case ValueType::None: return false;
        case ValueType::Bool: return scalar_.boolean;
        case ValueType::Int: return scalar_.integer != 0;
        case ValueType::Float: return scalar_.floating != 0.0;
        case ValueType::String: return !as_string().empty();
        case ValueType::List: return !as_list().empty();
        case ValueType::View: return view_kind() == ViewKind::Generator || !as_list().empty();
        case ValueType::Dict: return !as_dict().empty();
        case ValueType::Object: return true;
    }
    return false;
}

std::string Value::type_name() const {
    switch (type_) {
        case ValueType::Undefined: return "Undefined";
        case ValueType::None: return "NoneType";
        case ValueType::Bool: return "bool";
        case ValueType::Int: return "int";
        case ValueType::Float: return "float";
        case ValueType::String: return flag_ ? "Markup" : "str";
        case ValueType::List: return flag_ ? "tuple" : "list";
        case ValueType::View:
            switch (view_kind()) {
                case ViewKind::Generator: return "generator";
                case ViewKind::DictKeys: return "dict_keys";
                case ViewKind::DictValues: return "dict_values";
                case ViewKind::DictItems: return "dict_items";
            }
            return "generator";
        case ValueType::Dict: return "dict";
        case ValueType::Object: return as_object()->type_name();
    }
    return "object";
}

std::string Value::object_type_repr() const {
    if (is_none()) return "None";
    return type_name() + " object";
}

void Dict::set(Value key, Value value) {
    require_hashable(key);
    if (auto index = index_of(key)) {
        depth_ = std::max(depth_, value.depth());
        items_[*index].second = std::move(value);
        return;
    }
    depth_ = std::max({depth_, key.depth(), value.depth()});
    if (key.is_string()) string_keys_.emplace(key.as_string(), items_.size());
    items_.emplace_back(std::move(key), std::move(value));
}

std::optional<size_t> Dict::index_of(const Value& key) const {
    if (key.is_string()) {
        auto found = string_keys_.find(key.as_string());
        if (found == string_keys_.end()) return std::nullopt;
        return found->second;
    }
    for (size_t index = 0; index < items_.size(); ++index) {
        if (!items_[index].first.is_string() && values_equal(items_[index].first, key))
            return index;
    }
    return std::nullopt;
}

const Value* Dict::find(const Value& key) const {
    if (key.is_list() && !key.is_tuple()) return nullptr;
    if (key.is_dict()) return nullptr;
    auto index = index_of(key);
    return index ? &items_[*index].second : nullptr;
}

const Value* Dict::find(std::string_view key) const {
    auto found = string_keys_.find(std::string(key));
    return found == string_keys_.end() ? nullptr : &items_[found->second].second;
}

std::optional<Value> Object::attribute(std::string_view) const {
    return std::nullopt;
}

Value Object::call(Renderer&, CallArgs&) {
    throw_invalid("'" + type_name() + "' object is not callable");
}

bool values_equal(const Value& left, const Value& right) {
    return equal_at(left, right, 0);
}

std::string to_str(const Value& value, int depth) {
    if (value.is_string()) return value.as_string();
    std::string out;
    append_str(out, value, depth);
    return out;
}

std::string repr(const Value& value, int depth) {
    std::string out;
    append_repr(out, value, depth);
    return out;
}

void require_hashable(const Value& value) {
    if (value.is_dict() || (value.is_list() && !value.is_tuple())) {
        throw_invalid("unhashable type: '" + value.type_name() + "'");
    }
    if (value.is_tuple()) {
        for (const auto& item : value.as_list()) require_hashable(item);
    }
}

}  // namespace cherenkov::text::jinja
