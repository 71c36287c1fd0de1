// json.dumps clone: same escapes, float repr, key coercion, indentation and separators as
// CPython's json encoder.
#include "text/jinja/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "text/jinja/python_text.h"

namespace cherenkov::text::jinja {

namespace {

class JsonWriter {
public:
    JsonWriter(std::string& out, const JsonOptions& options) : out_(out), options_(options) {
        bool indented = options.indent.has_value();
        item_separator_ = options.item_separator.value_or(indented ? "," : ", ");
        key_separator_ = options.key_separator.value_or(": ");
    }

    void write(const Value& value, int depth) {
        if (depth > kMaxValueDepth) throw_invalid("maximum recursion depth exceeded in tojson");
        switch (value.type()) {
            case ValueType::None: out_ += "null"; return;
            case ValueType::Bool: out_ += value.as_bool() ? "true" : "false"; return;
            case ValueType::Int: out_ += std::to_string(value.as_int()); return;
            case ValueType::Float: write_float(value.as_float()); return;
            case ValueType::String:
                append_json_string(out_, value.as_string(), options_.ensure_ascii);
                return;
            case ValueType::List: write_list(value.as_list(), depth); return;
            case ValueType::Dict: write_dict(value.as_dict(), depth); return;
            default:
                throw_invalid("Object of type " + value.type_name() + " is not JSON serializable");
        }
    }

private:
    void write_float(double number) {
        if (std::isnan(number)) {
            out_ += "NaN";
        } else if (std::isinf(number)) {
            out_ += number > 0 ? "Infinity" : "-Infinity";
        } else {
            out_ += repr_float(number);
        }
    }

    void newline(int level) {
        if (!options_.indent) return;
        out_ += '\n';
        for (int step = 0; step < level; ++step) out_ += *options_.indent;
    }

    void write_list(const ValueList& items, int depth) {
        if (items.empty()) {
            out_ += "[]";
            return;
        }
        out_ += '[';
        for (size_t index = 0; index < items.size(); ++index) {
            if (index > 0) out_ += item_separator_;
            newline(depth + 1);
            write(items[index], depth + 1);
        }
        newline(depth);
        out_ += ']';
    }

    std::string key_text(const Value& key) {
        switch (key.type()) {
            case ValueType::String: return key.as_string();
            case ValueType::None: return "null";
            case ValueType::Bool: return key.as_bool() ? "true" : "false";
            case ValueType::Int: return std::to_string(key.as_int());
            case ValueType::Float: {
                std::string saved;
                std::swap(saved, out_);
                write_float(key.as_float());
                std::swap(saved, out_);
                return saved;
            }
            default:
                throw_invalid("keys must be str, int, float, bool or None, not " + key.type_name());
        }
    }

    std::vector<const Dict::Item*> ordered_items(const Dict& dict) {
        std::vector<const Dict::Item*> items;
        for (const auto& item : dict.items()) items.push_back(&item);
        if (!options_.sort_keys) return items;
        bool all_strings = std::all_of(items.begin(), items.end(),
                                       [](const auto* item) { return item->first.is_string(); });
        bool all_numbers = std::all_of(items.begin(), items.end(),
                                       [](const auto* item) { return item->first.is_number(); });
        if (!all_strings && !all_numbers) {
            throw_invalid("'<' not supported between dict keys of different types");
        }
        std::stable_sort(items.begin(), items.end(), [&](const auto* a, const auto* b) {
            if (all_strings) return a->first.as_string() < b->first.as_string();
            return a->first.as_float() < b->first.as_float();
        });
        return items;
    }

    void write_dict(const Dict& dict, int depth) {
        if (dict.empty()) {
            out_ += "{}";
            return;
        }
        out_ += '{';
        bool first = true;
        for (const auto* item : ordered_items(dict)) {
            if (!first) out_ += item_separator_;
            first = false;
            newline(depth + 1);
            append_json_string(out_, key_text(item->first), options_.ensure_ascii);
            out_ += key_separator_;
            write(item->second, depth + 1);
        }
        newline(depth);
        out_ += '}';
    }

    std::string& out_;
    const JsonOptions& options_;
    std::string item_separator_;
    std::string key_separator_;
};

void append_escape(std::string& out, unsigned code) {
    char buffer[16];
    std::snprintf(buffer, sizeof(buffer), "\\u%04x", code);
    out += buffer;
}

}  // namespace

std::string dump_json(const Value& value, const JsonOptions& options) {
    std::string out;
    JsonWriter(out, options).write(value, 0);
    return out;
}

void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
    out += '"';
    size_t pos = 0;
    while (pos < text.size()) {
        unsigned char byte = static_cast<unsigned char>(text[pos]);
        if (byte >= 0x80) {
            size_t end = pos + 1;
            while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
                ++end;
            if (!ensure_ascii) {
                out.append(text, pos, end - pos);
            } else {
                for (char32_t c : decode_utf8(std::string_view(text).substr(pos, end - pos))) {
                    if (c >= 0x10000) {
                        char32_t v = c - 0x10000;
                        append_escape(out, 0xD800 | static_cast<unsigned>(v >> 10));
                        append_escape(out, 0xDC00 | static_cast<unsigned>(v & 0x3FF));
                    } else {
                        append_escape(out, static_cast<unsigned>(c));
                    }
                }
            }
            pos = end;
            continue;
        }
        switch (byte) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) {
                    append_escape(out, byte);
                } else {
                    out += static_cast<char>(byte);
                }
        }
        ++pos;
    }
    out += '"';
}

}  // namespace cherenkov::text::jinja
