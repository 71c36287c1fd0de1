// Renders a GgufFile as JSON (complete) and as text (abbreviated for people).
#include "model_data/inspect/gguf_report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

namespace cherenkov::model_data::inspect {
namespace {

using gguf::GgufFile;
using gguf::GgufTensorInfo;
using gguf::GgufValue;
using gguf::GgufValueType;

constexpr std::string_view kUnsupportedReason =
    "GGUF conversion is not supported by the qwen4_exp engine; inspection only";
constexpr uint64_t kTextArrayItems = 8;    // arrays up to this long print whole
constexpr uint64_t kTextArrayPreview = 3;  // longer ones print this many, then "..."
constexpr size_t kTextStringBytes = 96;    // longer strings are cut
constexpr size_t kTextStringPreview = 64;

// Length of the valid UTF-8 sequence starting at text[pos], or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid, as in RFC 3629).
size_t utf8_sequence_length(std::string_view text, size_t pos) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) return 1;
    size_t length = 0;
    uint32_t code_point = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code_point = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code_point = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code_point = lead & 0x07;
    } else {
        return 0;
    }
    if (text.size() - pos < length) return 0;
    for (size_t index = 1; index < length; ++index) {
        const auto byte = static_cast<unsigned char>(text[pos + index]);
        if ((byte & 0xC0) != 0x80) return 0;
        code_point = (code_point << 6) | (byte & 0x3F);
    }
    if (length == 3 && (code_point < 0x800 || (code_point >= 0xD800 && code_point <= 0xDFFF))) {
        return 0;
    }
    if (length == 4 && (code_point < 0x10000 || code_point > 0x10FFFF)) return 0;
    return length;
}

// The text with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t length = utf8_sequence_length(text, pos);
        if (length == 0) {
            out += "\xEF\xBF\xBD";
            ++pos;
            continue;
        }
        out.append(text.substr(pos, length));
        pos += length;
    }
    return out;
}

// Shortest decimal that reads back as the same float32 (0.1f prints as 0.1, not
// 0.10000000149011612); float64 values print the shortest double form.
std::string float_text(GgufValueType type, double value) {
    char buffer[64];
    std::to_chars_result result{};
    if (type == GgufValueType::Float32) {
        result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<float>(value));
    } else {
        result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    }
    return std::string(buffer, result.ptr);
}

nlohmann::json float_json(GgufValueType type, double value) {
    if (!std::isfinite(value)) return nullptr;
    if (type == GgufValueType::Float64) return value;
    // The double nearest the float32's shortest decimal, so JSON readers see "0.1".
    const std::string text = float_text(type, value);
    double decimal = value;
    std::from_chars(text.data(), text.data() + text.size(), decimal);
    return decimal;
}

nlohmann::json value_json(const GgufValue& value) {
    const GgufValueType type = value.type();
    if (gguf::gguf_is_unsigned(type)) return value.as_unsigned();
    if (gguf::gguf_is_signed(type)) return value.as_signed();
    if (gguf::gguf_is_float(type)) return float_json(type, value.as_float());
    if (type == GgufValueType::Bool) return value.as_bool();
    if (type == GgufValueType::String) return valid_utf8(value.as_string());
    nlohmann::json array = nlohmann::json::array();
    const uint64_t size = value.array_size();
    for (uint64_t index = 0; index < size; ++index)
        array.push_back(value_json(value.element(index)));
    return array;
}

// "uint32", "array[string]", "array[array[int8]]"; "array[array]" when the inner arrays differ.
std::string type_text(const GgufValue& value) {
    if (value.type() != GgufValueType::Array) {
        return std::string(gguf::gguf_value_type_name(value.type()));
    }
    if (value.element_type() != GgufValueType::Array) {
        return "array[" + std::string(gguf::gguf_value_type_name(value.element_type())) + "]";
    }
    const uint64_t size = value.array_size();
    if (size == 0) return "array[array]";
    const std::string first = type_text(value.element(0));
    for (uint64_t index = 1; index < size; ++index) {
        if (type_text(value.element(index)) != first) return "array[array]";
    }
    return "array[" + first + "]";
}

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string text = "[";
    for (size_t dim = 0; dim < shape.size(); ++dim) {
        if (dim > 0) text += ", ";
        text += std::to_string(shape[dim]);
    }
    return text + "]";
}

// 1536 -> "1.5 KiB".
std::string bytes_text(uint64_t n_bytes) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double scaled = static_cast<double>(n_bytes);
    size_t unit = 0;
    while (scaled >= 1024.0 && unit + 1 < std::size(kUnits)) {
        scaled /= 1024.0;
        ++unit;
    }
    char buffer[32];
    if (unit == 0) {
        std::snprintf(buffer, sizeof(buffer), "%llu B", static_cast<unsigned long long>(n_bytes));
    } else {
        std::snprintf(buffer, sizeof(buffer), "%.2f %s", scaled, kUnits[unit]);
    }
    return buffer;
}

// A double-quoted, escaped, possibly shortened string for the text report.
std::string string_text(std::string_view raw) {
    const bool cut = raw.size() > kTextStringBytes;
    const std::string_view shown = cut ? raw.substr(0, kTextStringPreview) : raw;
    std::string out = "\"";
    size_t pos = 0;
    while (pos < shown.size()) {
        const auto byte = static_cast<unsigned char>(shown[pos]);
        if (byte == '"' || byte == '\\') {
            out += '\\';
            out += static_cast<char>(byte);
        } else if (byte == '\n') {
            out += "\\n";
        } else if (byte == '\t') {
            out += "\\t";
        } else if (byte == '\r') {
            out += "\\r";
        } else if (byte >= 0x80 && utf8_sequence_length(shown, pos) > 0) {
            const size_t length = utf8_sequence_length(shown, pos);
            out.append(shown.substr(pos, length));
            pos += length;
            continue;
        } else if (byte < 0x20 || byte >= 0x7F) {
            char escaped[8];
            std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned>(byte));
            out += escaped;
        } else {
            out += static_cast<char>(byte);
        }
        ++pos;
    }
    out += '"';
    if (cut) out += "... (" + std::to_string(raw.size()) + " bytes)";
    return out;
}

std::string value_text(const GgufValue& value);

// "[1, 2, 3]" for short arrays; "[151936 strings: "!", "\"", "#", ...]" for long ones.
std::string array_text(const GgufValue& value) {
    const uint64_t size = value.array_size();
    const bool abbreviated = size > kTextArrayItems;
    const uint64_t shown = abbreviated ? kTextArrayPreview : size;
    std::string text = "[";
    if (abbreviated) {
        const GgufValueType element = value.element_type();
        text += std::to_string(size) + " ";
        if (element == GgufValueType::String) {
            text += "strings";
        } else if (element == GgufValueType::Array) {
            text += "arrays";
        } else {
            text += std::string(gguf::gguf_value_type_name(element)) + " values";
        }
        text += ": ";
    }
    for (uint64_t index = 0; index < shown; ++index) {
        if (index > 0) text += ", ";
        text += value_text(value.element(index));
    }
    if (abbreviated) text += ", ...";
    return text + "]";
}

std::string value_text(const GgufValue& value) {
    const GgufValueType type = value.type();
    if (gguf::gguf_is_unsigned(type)) return std::to_string(value.as_unsigned());
    if (gguf::gguf_is_signed(type)) return std::to_string(value.as_signed());
    if (gguf::gguf_is_float(type)) return float_text(type, value.as_float());
    if (type == GgufValueType::Bool) return value.as_bool() ? "true" : "false";
    if (type == GgufValueType::String) return string_text(value.as_string());
    return array_text(value);
}

// "1 tensor", "2 tensors".
std::string count_text(uint64_t count, std::string_view noun) {
    return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

std::string padded(std::string text, size_t width) {
    if (text.size() < width) text.append(width - text.size(), ' ');
    return text;
}

void append_metadata(const GgufFile& file, std::string& out) {
    out += "\nmetadata (" + std::to_string(file.metadata.size()) +
           (file.metadata.size() == 1 ? " entry" : " entries") + "):\n";
    size_t key_width = 0;
    size_t type_width = 0;
    std::vector<std::string> types;
    types.reserve(file.metadata.size());
    for (const auto& entry : file.metadata) {
        key_width = std::max(key_width, std::min<size_t>(entry.key.size(), 48));
        types.push_back(type_text(entry.value));
        type_width = std::max(type_width, types.back().size());
    }
    for (size_t index = 0; index < file.metadata.size(); ++index) {
        const auto& entry = file.metadata[index];
        std::string key = string_text(entry.key);
        key = key.substr(1, key.size() - 2);  // keys print unquoted, still escaped
        out += "  " + padded(key, key_width) + "  " + padded(types[index], type_width) + "  " +
               value_text(entry.value) + "\n";
    }
}

void append_tensors(const GgufFile& file, std::string& out) {
    out += "\ntensors (" + std::to_string(file.tensors.size()) + "):\n";
    if (file.tensors.empty()) return;
    std::vector<std::string> names;
    std::vector<std::string> shapes;
    size_t name_width = 4;
    size_t shape_width = 5;
    size_t type_width = 4;
    for (const GgufTensorInfo& tensor : file.tensors) {
        std::string name = string_text(tensor.name);
        names.push_back(name.substr(1, name.size() - 2));
        shapes.push_back(shape_text(tensor.shape));
        name_width = std::max(name_width, names.back().size());
        shape_width = std::max(shape_width, shapes.back().size());
        type_width = std::max(type_width, tensor.type.name.size());
    }
    out += "  " + padded("name", name_width) + "  " + padded("shape", shape_width) + "  " +
           padded("type", type_width) + "  bytes\n";
    for (size_t index = 0; index < file.tensors.size(); ++index) {
        const GgufTensorInfo& tensor = file.tensors[index];
        out += "  " + padded(names[index], name_width) + "  " + padded(shapes[index], shape_width) +
               "  " + padded(std::string(tensor.type.name), type_width) + "  " +
               std::to_string(tensor.n_bytes) + "\n";
    }
}

void append_totals(const GgufFile& file, std::string& out) {
    struct Total {
        std::string_view name;
        uint64_t n_tensors = 0;
        uint64_t n_elements = 0;
        uint64_t n_bytes = 0;
    };
    std::map<uint32_t, Total> by_type;  // ordered by type id
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    for (const GgufTensorInfo& tensor : file.tensors) {
        Total& total = by_type[tensor.type.id];
        total.name = tensor.type.name;
        ++total.n_tensors;
        total.n_elements += tensor.n_elements;
        total.n_bytes += tensor.n_bytes;
        n_elements += tensor.n_elements;
        n_bytes += tensor.n_bytes;
    }
    out += "\ntotals by type:\n";
    for (const auto& [id, total] : by_type) {
        out += "  " + padded(std::string(total.name), 8) + "  " +
               padded(count_text(total.n_tensors, "tensor"), 14) + "  " +
               padded(count_text(total.n_elements, "element"), 24) + "  " +
               std::to_string(total.n_bytes) + " bytes (" + bytes_text(total.n_bytes) + ")\n";
    }
    out += "  " + padded("all", 8) + "  " + padded(count_text(file.tensors.size(), "tensor"), 14) +
           "  " + padded(count_text(n_elements, "element"), 24) + "  " + std::to_string(n_bytes) +
           " bytes (" + bytes_text(n_bytes) + ")\n";
}

}  // namespace

nlohmann::json gguf_report_json(const GgufFile& file) {
    nlohmann::json report;
    report["format"] = "gguf";
    report["path"] = valid_utf8(file.path);
    report["version"] = file.version;
    report["alignment"] = file.alignment;
    report["header_bytes"] = file.header_bytes;
    report["data_offset"] = file.data_offset;
    report["file_size"] = file.file_size;
    const auto architecture = file.architecture();
    report["architecture"] = architecture ? nlohmann::json(valid_utf8(*architecture)) : nullptr;

    nlohmann::json metadata = nlohmann::json::object();
    nlohmann::json types = nlohmann::json::object();
    for (const auto& entry : file.metadata) {
        const std::string key = valid_utf8(entry.key);
        metadata[key] = value_json(entry.value);
        types[key] = type_text(entry.value);
    }
    report["metadata"] = std::move(metadata);
    report["metadata_types"] = std::move(types);

    nlohmann::json tensors = nlohmann::json::array();
    for (const GgufTensorInfo& tensor : file.tensors) {
        tensors.push_back({
            {"name", valid_utf8(tensor.name)},
            {"shape", tensor.shape},
            {"ggml_type", tensor.type.name},
            {"type_id", tensor.type.id},
            {"offset", tensor.file_offset},
            {"relative_offset", tensor.relative_offset},
            {"n_elements", tensor.n_elements},
            {"n_bytes", tensor.n_bytes},
        });
    }
    report["tensors"] = std::move(tensors);
    report["engine_support"] = {{"supported", false}, {"reason", kUnsupportedReason}};
    return report;
}

std::string gguf_report_text(const GgufFile& file) {
    std::string out = "GGUF file " + file.path + "\n";
    out += "  version        " + std::to_string(file.version) + "\n";
    out += "  file size      " + std::to_string(file.file_size) + " bytes (" +
           bytes_text(file.file_size) + ")\n";
    out += "  alignment      " + std::to_string(file.alignment) + "\n";
    out += "  header         " + std::to_string(file.header_bytes) +
           " bytes, data section at byte " + std::to_string(file.data_offset) + "\n";
    const auto architecture = file.architecture();
    out += "  architecture   " + (architecture ? string_text(*architecture) : "(none)") + "\n";
    out += "  engine support no: " + std::string(kUnsupportedReason) + "\n";
    append_metadata(file, out);
    append_tensors(file, out);
    append_totals(file, out);
    return out;
}

}  // namespace cherenkov::model_data::inspect
