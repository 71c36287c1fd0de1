// GGUF metadata values (docs/formats.md §4.2): the thirteen on-disk value types and a value that
// keeps its exact type, including arrays of any element type and nested arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cherenkov::model_data::gguf {

// Metadata value types; the enumerator values are the on-disk ids (§4.2).
enum class GgufValueType : uint32_t {
    Uint8 = 0,
    Int8 = 1,
    Uint16 = 2,
    Int16 = 3,
    Uint32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    Uint64 = 10,
    Int64 = 11,
    Float64 = 12,
};

// "uint8", "int32", "float32", "bool", "string", "array", ... (lower case, as gguf-py prints).
std::string_view gguf_value_type_name(GgufValueType type);

// The type with this on-disk id, or nullopt for ids above 12.
[[nodiscard]] std::optional<GgufValueType> gguf_value_type_from_id(uint32_t id);

// Bytes one value of a fixed-width type occupies on disk; 0 for String and Array.
uint32_t gguf_value_type_width(GgufValueType type);

bool gguf_is_unsigned(GgufValueType type);  // Uint8, Uint16, Uint32, Uint64
bool gguf_is_signed(GgufValueType type);    // Int8, Int16, Int32, Int64
bool gguf_is_float(GgufValueType type);     // Float32, Float64

// One metadata value, keeping its exact on-disk type. Integers widen to 64 bits and floats to
// double without loss. Arrays of fixed-width scalars keep their little-endian wire bytes and
// decode one element at a time, so a 150k-entry array costs its file size, not 48 bytes a value.
// Accessors that do not match type() are programming errors (Internal).
class GgufValue {
public:
    static GgufValue unsigned_integer(GgufValueType type, uint64_t value);
    static GgufValue signed_integer(GgufValueType type, int64_t value);
    static GgufValue floating(GgufValueType type, double value);
    static GgufValue boolean(bool value);
    static GgufValue string(std::string value);
    // A fixed-width scalar from the low gguf_value_type_width(type) bytes of `bits`, read
    // little-endian: sign-extends signed types, bit-casts floats; Bool is bits != 0.
    static GgufValue from_bits(GgufValueType type, uint64_t bits);
    // `raw`: array_size * width bytes, little-endian, Bool bytes already checked to be 0 or 1.
    static GgufValue scalar_array(GgufValueType element_type, std::vector<std::byte> raw);
    static GgufValue string_array(std::vector<std::string> values);
    // Each element is itself an Array value; element types may differ between them.
    static GgufValue nested_array(std::vector<GgufValue> values);

    GgufValueType type() const { return type_; }

    uint64_t as_unsigned() const;
    int64_t as_signed() const;
    double as_float() const;
    bool as_bool() const;
    const std::string& as_string() const;

    // Arrays only.
    GgufValueType element_type() const;
    uint64_t array_size() const;
    // Element `index` (< array_size()) as a value of element_type().
    GgufValue element(uint64_t index) const;

private:
    using Payload =
        std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<std::byte>,
                     std::vector<std::string>, std::vector<GgufValue>>;

    // Scalars: element_type_ repeats type. Arrays set element_type_ after construction.
    GgufValue(GgufValueType type, Payload payload)
        : type_(type), element_type_(type), payload_(std::move(payload)) {}

    GgufValueType type_;
    GgufValueType element_type_;  // meaningful for arrays only
    Payload payload_;
};

}  // namespace cherenkov::model_data::gguf
