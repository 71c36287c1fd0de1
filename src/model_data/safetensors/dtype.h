// The safetensors dtype strings (docs/formats.md §1.3) with their bit widths.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace cherenkov::model_data {

enum class Dtype {
    Bool,
    U8,
    I8,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
    C64,
    F8_E4M3,
    F8_E5M2,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    F4,
    F6_E2M3,
    F6_E3M2,
};

std::optional<Dtype> parse_dtype(std::string_view name);
std::string_view dtype_name(Dtype dtype);
// Bits per element; sub-byte types (F4, F6_*) are packed.
int dtype_bits(Dtype dtype);
bool dtype_is_float(Dtype dtype);

}  // namespace cherenkov::model_data
