// JSON -> Value.
#include "text/jinja/json_value.h"

#include "base/error.h"

namespace cherenkov::text::jinja {

namespace {

Value convert(const nlohmann::ordered_json& json, int depth) {
    if (depth > kMaxValueDepth) {
        throw_invalid("JSON nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
    }
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null: return Value::none();
        case nlohmann::ordered_json::value_t::boolean: return Value::boolean(json.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value::integer(json.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            auto value = json.get<uint64_t>();
            if (value > static_cast<uint64_t>(INT64_MAX)) {
                throw_invalid("integer " + std::to_string(value) + " does not fit in 64 bits");
            }
            return Value::integer(static_cast<int64_t>(value));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value::floating(json.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value::string(json.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            ValueList items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(convert(item, depth + 1));
            return Value::list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            Dict dict;
            for (const auto& [key, item] : json.items())
                dict.set(Value::string(key), convert(item, depth + 1));
            return Value::dict(std::move(dict));
        }
        default: throw_invalid("unsupported JSON value (binary or discarded)");
    }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) {
    return convert(json, 0);
}

}  // namespace cherenkov::text::jinja
