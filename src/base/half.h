// Conversions between float32 and the 16-bit float formats the checkpoints store:
// bfloat16 (upper half of a float32) and IEEE binary16.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace cherenkov {

inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

// Round to nearest even, as torch and MLX do; NaN stays a quiet NaN.
inline uint16_t float_to_bf16(float value) {
    uint32_t bits = std::bit_cast<uint32_t>(value);
    if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
    uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float f16_to_float(uint16_t bits) {
    uint32_t sign = uint32_t{bits & 0x8000u} << 16;
    uint32_t exponent = (bits >> 10) & 0x1F;
    uint32_t mantissa = bits & 0x3FF;
    if (exponent == 0) {
        // Zero or subnormal: value = mantissa * 2^-24.
        float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

}  // namespace cherenkov
