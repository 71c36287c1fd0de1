// The interpreter's value: Jinja2's undefined plus the Python types a template can see (None,
// bool, int, float, str, list/tuple, dict) and objects (namespace, macro, loop, functions).
// Strings, lists and dicts are immutable and shared; the sandbox transformers uses forbids
// mutating them, so copies are cheap. Only objects (namespace, cycler) carry state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace cherenkov::text::jinja {

class Value;
class Dict;
class Object;
class Renderer;
struct CallArgs;

using ValueList = std::vector<Value>;

enum class ValueType { Undefined, None, Bool, Int, Float, String, List, View, Dict, Object };

// Iterables that are not sequences: generators (what map, select and friends return), and the
// views dict.keys(), .values() and .items() return. They iterate like lists but have other
// truthiness, len() and printing rules.
enum class ViewKind : uint8_t { Generator, DictKeys, DictValues, DictItems };

class Value {
public:
    // An undefined value with Jinja2's default message for a missing variable.
    Value();

    // `message` is what misusing this undefined reports (Jinja2's UndefinedError text).
    // `unsafe` marks the sandbox's refusal of an attribute (SecurityError when used).
    static Value undefined(std::string message, bool unsafe = false);
    static Value none();
    static Value boolean(bool value);
    static Value integer(int64_t value);
    static Value floating(double value);
    // `safe` marks markupsafe.Markup (the `safe` filter), whose + and % escape the other side.
    static Value string(std::string value, bool safe = false);
    static Value list(ValueList items);
    static Value tuple(ValueList items);
    static Value view(ViewKind kind, ValueList items);
    static Value dict(Dict items);
    static Value object(std::shared_ptr<Object> object);

    ValueType type() const { return type_; }
    bool is_undefined() const { return type_ == ValueType::Undefined; }
    bool is_none() const { return type_ == ValueType::None; }
    bool is_bool() const { return type_ == ValueType::Bool; }
    bool is_int() const { return type_ == ValueType::Int; }
    bool is_float() const { return type_ == ValueType::Float; }
    bool is_string() const { return type_ == ValueType::String; }
    bool is_list() const { return type_ == ValueType::List; }  // list or tuple
    bool is_view() const { return type_ == ValueType::View; }
    bool is_dict() const { return type_ == ValueType::Dict; }
    bool is_object() const { return type_ == ValueType::Object; }
    // Python's numbers.Number: bool, int and float.
    bool is_number() const { return is_bool() || is_int() || is_float(); }
    // Python int including bool (bool subclasses int).
    bool is_integral() const { return is_bool() || is_int(); }
    bool is_safe() const { return is_string() && flag_ != 0; }
    bool is_tuple() const { return is_list() && flag_ != 0; }
    ViewKind view_kind() const { return static_cast<ViewKind>(flag_); }

    bool as_bool() const { return scalar_.boolean; }
    // int value of a bool or int.
    int64_t as_int() const { return is_bool() ? (scalar_.boolean ? 1 : 0) : scalar_.integer; }
    // float value of any number.
    double as_float() const;
    const std::string& as_string() const;
    // Items of a list, tuple or view.
    const ValueList& as_list() const;
    const Dict& as_dict() const;
    const std::shared_ptr<Object>& as_object() const;
    const std::string& undefined_message() const;
    bool undefined_is_unsafe() const { return is_undefined() && flag_ != 0; }
    // The shared storage behind a str, list, view, dict or object (Python's `is`).
    const void* identity() const;
    // Container nesting: 0 for scalars, 1 + the deepest item for lists and dicts.
    int depth() const { return depth_; }

    // Python bool(value).
    bool truthy() const;
    // Python type name as error messages show it: 'str', 'int', 'NoneType', 'Undefined', ...
    std::string type_name() const;
    // Jinja2's object_type_repr: "dict object", "None", "list object", ...
    std::string object_type_repr() const;

private:
    union Scalar {
        bool boolean;
        int64_t integer;
        double floating;
    };
    using Ref = std::variant<std::monostate, std::shared_ptr<const std::string>,
                             std::shared_ptr<const ValueList>, std::shared_ptr<const Dict>,
                             std::shared_ptr<Object>>;

    ValueType type_ = ValueType::Undefined;
    // String: 1 for Markup. ValueList: 1 for tuple. View: the ViewKind. Undefined: 1 for unsafe.
    uint8_t flag_ = 0;
    int depth_ = 0;
    Scalar scalar_{};
    Ref ref_;
};

// A Python dict: insertion-ordered, keys compared with Python equality (1 == 1.0 == True).
class Dict {
public:
    using Item = std::pair<Value, Value>;

    // Inserts or overwrites (keeping the first insertion's position). Throws InvalidInput for
    // an unhashable key (list, dict).
    void set(Value key, Value value);
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    const std::vector<Item>& items() const { return items_; }
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    // Deepest key or value nesting (see Value::depth).
    int depth() const { return depth_; }

private:
    std::optional<size_t> index_of(const Value& key) const;

    std::vector<Item> items_;
    int depth_ = 0;
    std::unordered_map<std::string, size_t> string_keys_;  // str key -> index into items_
};

// Namespaces, macros, loop contexts, functions and bound methods.
class Object {
public:
    virtual ~Object() = default;
    virtual std::string type_name() const = 0;
    // `depth` is the nesting already walked, passed on to repr() of contained values.
    virtual std::string repr(int depth) const = 0;
    // The attribute `name`, or nullopt when the object has none (Jinja2 then yields undefined).
    virtual std::optional<Value> attribute(std::string_view name) const;
    virtual bool is_callable() const { return false; }
    virtual Value call(Renderer& renderer, CallArgs& args);
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;
};

// Python ==. Nested containers compare element-wise; depth is bounded (throws past it).
bool values_equal(const Value& left, const Value& right);
// Python str() and repr(); `depth` is the nesting already walked by a caller.
std::string to_str(const Value& value, int depth = 0);
std::string repr(const Value& value, int depth = 0);
// Throws InvalidInput "unhashable type: 'list'" unless `value` may be a dict key.
void require_hashable(const Value& value);

// Deepest nesting of lists and dicts a value may have, and that str(), == and tojson walk
// through objects. Building anything deeper throws, so that no walk (nor destruction) can
// exhaust the stack; CPython's recursion limit stops runaway structures at a similar depth.
inline constexpr int kMaxValueDepth = 256;

}  // namespace cherenkov::text::jinja
