// Sandboxed attribute/item lookup, slicing, iteration and len() over values.
#include "text/jinja/lookup.h"

#include "base/error.h"
#include "text/jinja/methods.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

bool is_dunder(std::string_view name) {
    return name.size() > 1 && name[0] == '_' && name[1] == '_';
}

Value unsafe_attribute(const Value& object, std::string_view name) {
    return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                object.type_name() + "' object is unsafe.",
                            true);
}

// Python's slice.indices(): clamps the bounds to a sequence of `size` items.
struct SliceBounds {
    int64_t start;
    int64_t stop;
    int64_t step;
};

bool slice_index(const std::optional<Value>& bound, int64_t& out) {
    if (!bound || bound->is_none()) return false;
    out = bound->as_int();
    return true;
}

SliceBounds slice_bounds(int64_t size, const std::optional<Value>& start,
                         const std::optional<Value>& stop, const std::optional<Value>& step) {
    SliceBounds bounds{0, 0, 1};
    slice_index(step, bounds.step);
    if (bounds.step == 0) throw_invalid("slice step cannot be zero");
    bool forward = bounds.step > 0;
    auto clamp = [&](int64_t index) {
        if (index < 0) {
            index += size;
            if (index < 0) index = forward ? 0 : -1;
        } else if (index >= size) {
            index = forward ? size : size - 1;
        }
        return index;
    };
    int64_t value = 0;
    bounds.start = slice_index(start, value) ? clamp(value) : (forward ? 0 : size - 1);
    bounds.stop = slice_index(stop, value) ? clamp(value) : (forward ? size : -1);
    return bounds;
}

bool slice_bound_ok(const std::optional<Value>& bound) {
    return !bound || bound->is_none() || bound->is_integral();
}

}  // namespace

void fail_undefined(const Value& undefined) {
    throw_invalid(undefined.undefined_message());
}

Value missing_attribute(const Value& object, std::string_view name) {
    return Value::undefined("'" + object.object_type_repr() + "' has no attribute '" +
                            std::string(name) + "'");
}

Value get_attribute(const Value& object, std::string_view name) {
    if (object.is_undefined()) fail_undefined(object);
    if (is_dunder(name)) return unsafe_attribute(object, name);
    if (object.is_object()) {
        if (auto found = object.as_object()->attribute(name)) return *found;
        return missing_attribute(object, name);
    }
    if (auto method = builtin_attribute(object, name)) return *method;
    if (object.is_dict()) {
        if (const Value* found = object.as_dict().find(name)) return *found;
    }
    return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) fail_undefined(object);
    if (object.is_dict()) {
        bool hashable = !key.is_dict() && !(key.is_list() && !key.is_tuple());
        if (hashable) {
            if (const Value* found = object.as_dict().find(key)) return *found;
        }
    } else if ((object.is_list() || object.is_string()) && key.is_integral()) {
        int64_t size = static_cast<int64_t>(length(object));
        int64_t index = key.as_int();
        if (index < 0) index += size;
        if (index >= 0 && index < size) {
            if (object.is_list()) return object.as_list()[static_cast<size_t>(index)];
            const auto& text = object.as_string();
            size_t begin = code_point_offset(text, static_cast<size_t>(index));
            size_t end = code_point_offset(text, static_cast<size_t>(index) + 1);
            return Value::string(text.substr(begin, end - begin), object.is_safe());
        }
    }
    if (!key.is_string()) {
        return Value::undefined(object.object_type_repr() + " has no element " + repr(key));
    }
    const auto& name = key.as_string();
    if (is_dunder(name)) return unsafe_attribute(object, name);
    if (object.is_object()) {
        if (auto found = object.as_object()->attribute(name)) return *found;
    } else if (auto method = builtin_attribute(object, name)) {
        return *method;
    }
    return missing_attribute(object, name);
}

Value get_slice(const Value& object, const std::optional<Value>& start,
                const std::optional<Value>& stop, const std::optional<Value>& step) {
    // Jinja2 compiles a slice to a plain Python subscript (not the sandbox's getitem), so
    // unsupported types fail instead of yielding undefined.
    if (object.is_undefined()) fail_undefined(object);
    if (object.is_dict()) throw_invalid("unhashable type: 'slice'");
    if (!object.is_list() && !object.is_string()) {
        throw_invalid("'" + object.type_name() + "' object is not subscriptable");
    }
    if (!slice_bound_ok(start) || !slice_bound_ok(stop) || !slice_bound_ok(step)) {
        throw_invalid("slice indices must be integers or None or have an __index__ method");
    }
    if (object.is_list()) {
        const auto& items = object.as_list();
        auto bounds = slice_bounds(static_cast<int64_t>(items.size()), start, stop, step);
        ValueList out;
        for (int64_t index = bounds.start;
             bounds.step > 0 ? index < bounds.stop : index > bounds.stop; index += bounds.step) {
            out.push_back(items[static_cast<size_t>(index)]);
        }
        return object.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    auto code_points = decode_utf8(object.as_string());
    auto bounds = slice_bounds(static_cast<int64_t>(code_points.size()), start, stop, step);
    std::u32string out;
    for (int64_t index = bounds.start; bounds.step > 0 ? index < bounds.stop : index > bounds.stop;
         index += bounds.step) {
        out.push_back(code_points[static_cast<size_t>(index)]);
    }
    return Value::string(encode_utf8(out), object.is_safe());
}

ValueList iterate(const Value& value) {
    switch (value.type()) {
        case ValueType::Undefined: return {};
        case ValueType::List:
        case ValueType::View: return value.as_list();
        case ValueType::Dict: {
            ValueList keys;
            keys.reserve(value.as_dict().size());
            for (const auto& item : value.as_dict().items()) keys.push_back(item.first);
            return keys;
        }
        case ValueType::String: {
            ValueList chars;
            std::string piece;
            for (char32_t c : decode_utf8(value.as_string())) {
                piece.clear();
                append_utf8(piece, c);
                chars.push_back(Value::string(piece, value.is_safe()));
            }
            return chars;
        }
        default: throw_invalid("'" + value.type_name() + "' object is not iterable");
    }
}

size_t length(const Value& value) {
    switch (value.type()) {
        case ValueType::Undefined: return 0;
        case ValueType::String: return count_code_points(value.as_string());
        case ValueType::List: return value.as_list().size();
        case ValueType::View:
            if (value.view_kind() == ViewKind::Generator) break;
            return value.as_list().size();
        case ValueType::Dict: return value.as_dict().size();
        default: break;
    }
    throw_invalid("object of type '" + value.type_name() + "' has no len()");
}

}  // namespace cherenkov::text::jinja
