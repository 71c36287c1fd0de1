// GgufValue construction and typed access; scalar arrays decode their little-endian wire bytes
// per element.
#include "model_data/gguf/gguf_value.h"

#include <bit>

#include "base/error.h"

namespace cherenkov::model_data::gguf {
namespace {

uint64_t load_le(const std::byte* bytes, uint32_t width) {
    uint64_t value = 0;
    for (uint32_t index = 0; index < width; ++index) {
        value |= static_cast<uint64_t>(bytes[index]) << (8 * index);
    }
    return value;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
    switch (type) {
        case GgufValueType::Uint8: return "uint8";
        case GgufValueType::Int8: return "int8";
        case GgufValueType::Uint16: return "uint16";
        case GgufValueType::Int16: return "int16";
        case GgufValueType::Uint32: return "uint32";
        case GgufValueType::Int32: return "int32";
        case GgufValueType::Float32: return "float32";
        case GgufValueType::Bool: return "bool";
        case GgufValueType::String: return "string";
        case GgufValueType::Array: return "array";
        case GgufValueType::Uint64: return "uint64";
        case GgufValueType::Int64: return "int64";
        case GgufValueType::Float64: return "float64";
    }
    return "unknown";
}

std::optional<GgufValueType> gguf_value_type_from_id(uint32_t id) {
    if (id > static_cast<uint32_t>(GgufValueType::Float64)) return std::nullopt;
    return static_cast<GgufValueType>(id);
}

uint32_t gguf_value_type_width(GgufValueType type) {
    switch (type) {
        case GgufValueType::Uint8:
        case GgufValueType::Int8:
        case GgufValueType::Bool: return 1;
        case GgufValueType::Uint16:
        case GgufValueType::Int16: return 2;
        case GgufValueType::Uint32:
        case GgufValueType::Int32:
        case GgufValueType::Float32: return 4;
        case GgufValueType::Uint64:
        case GgufValueType::Int64:
        case GgufValueType::Float64: return 8;
        case GgufValueType::String:
        case GgufValueType::Array: return 0;
    }
    return 0;
}

bool gguf_is_unsigned(GgufValueType type) {
    return type == GgufValueType::Uint8 || type == GgufValueType::Uint16 ||
           type == GgufValueType::Uint32 || type == GgufValueType::Uint64;
}

bool gguf_is_signed(GgufValueType type) {
    return type == GgufValueType::Int8 || type == GgufValueType::Int16 ||
           type == GgufValueType::Int32 || type == GgufValueType::Int64;
}

bool gguf_is_float(GgufValueType type) {
    return type == GgufValueType::Float32 || type == GgufValueType::Float64;
}

GgufValue GgufValue::unsigned_integer(GgufValueType type, uint64_t value) {
    CHERENKOV_ASSERT(gguf_is_unsigned(type), "unsigned_integer needs an unsigned type");
    return GgufValue(type, value);
}

GgufValue GgufValue::signed_integer(GgufValueType type, int64_t value) {
    CHERENKOV_ASSERT(gguf_is_signed(type), "signed_integer needs a signed type");
    return GgufValue(type, value);
}

GgufValue GgufValue::floating(GgufValueType type, double value) {
    CHERENKOV_ASSERT(gguf_is_float(type), "floating needs a float type");
    return GgufValue(type, value);
}

GgufValue GgufValue::boolean(bool value) {
    return GgufValue(GgufValueType::Bool, value);
}

GgufValue GgufValue::string(std::string value) {
    return GgufValue(GgufValueType::String, std::move(value));
}

GgufValue GgufValue::from_bits(GgufValueType type, uint64_t bits) {
    const uint32_t width = gguf_value_type_width(type);
    CHERENKOV_ASSERT(width > 0, "from_bits needs a fixed-width type");
    if (gguf_is_unsigned(type)) return unsigned_integer(type, bits);
    if (gguf_is_signed(type)) {
        // Sign-extend the low `width` bytes (arithmetic right shift is defined in C++20).
        const uint32_t shift = 64 - 8 * width;
        return signed_integer(type, static_cast<int64_t>(bits << shift) >> shift);
    }
    if (type == GgufValueType::Bool) return boolean(bits != 0);
    if (type == GgufValueType::Float32) {
        return floating(type, std::bit_cast<float>(static_cast<uint32_t>(bits)));
    }
    return floating(type, std::bit_cast<double>(bits));
}

GgufValue GgufValue::scalar_array(GgufValueType element_type, std::vector<std::byte> raw) {
    const uint32_t width = gguf_value_type_width(element_type);
    CHERENKOV_ASSERT(width > 0, "scalar_array needs a fixed-width element type");
    CHERENKOV_ASSERT(raw.size() % width == 0, "scalar_array bytes must be whole elements");
    GgufValue value(GgufValueType::Array, std::move(raw));
    value.element_type_ = element_type;
    return value;
}

GgufValue GgufValue::string_array(std::vector<std::string> values) {
    GgufValue value(GgufValueType::Array, std::move(values));
    value.element_type_ = GgufValueType::String;
    return value;
}

GgufValue GgufValue::nested_array(std::vector<GgufValue> values) {
    for (const GgufValue& value : values) {
        CHERENKOV_ASSERT(value.type() == GgufValueType::Array, "nested_array holds arrays only");
    }
    return GgufValue(GgufValueType::Array, std::move(values));
}

uint64_t GgufValue::as_unsigned() const {
    CHERENKOV_ASSERT(gguf_is_unsigned(type_), "as_unsigned on a non-unsigned GGUF value");
    return std::get<uint64_t>(payload_);
}

int64_t GgufValue::as_signed() const {
    CHERENKOV_ASSERT(gguf_is_signed(type_), "as_signed on a non-signed GGUF value");
    return std::get<int64_t>(payload_);
}

double GgufValue::as_float() const {
    CHERENKOV_ASSERT(gguf_is_float(type_), "as_float on a non-float GGUF value");
    return std::get<double>(payload_);
}

bool GgufValue::as_bool() const {
    CHERENKOV_ASSERT(type_ == GgufValueType::Bool, "as_bool on a non-bool GGUF value");
    return std::get<bool>(payload_);
}

const std::string& GgufValue::as_string() const {
    CHERENKOV_ASSERT(type_ == GgufValueType::String, "as_string on a non-string GGUF value");
    return std::get<std::string>(payload_);
}

GgufValueType GgufValue::element_type() const {
    CHERENKOV_ASSERT(type_ == GgufValueType::Array, "element_type on a non-array GGUF value");
    return element_type_;
}

uint64_t GgufValue::array_size() const {
    CHERENKOV_ASSERT(type_ == GgufValueType::Array, "array_size on a non-array GGUF value");
    if (element_type_ == GgufValueType::String) {
        return std::get<std::vector<std::string>>(payload_).size();
    }
    if (element_type_ == GgufValueType::Array) {
        return std::get<std::vector<GgufValue>>(payload_).size();
    }
    return std::get<std::vector<std::byte>>(payload_).size() / gguf_value_type_width(element_type_);
}

GgufValue GgufValue::element(uint64_t index) const {
    CHERENKOV_ASSERT(index < array_size(), "GGUF array element index out of range");
    if (element_type_ == GgufValueType::String) {
        return string(std::get<std::vector<std::string>>(payload_)[index]);
    }
    if (element_type_ == GgufValueType::Array) {
        return std::get<std::vector<GgufValue>>(payload_)[index];
    }
    const uint32_t width = gguf_value_type_width(element_type_);
    const auto& raw = std::get<std::vector<std::byte>>(payload_);
    return from_bits(element_type_, load_le(raw.data() + index * width, width));
}

}  // namespace cherenkov::model_data::gguf
