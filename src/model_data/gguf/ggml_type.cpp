// Sizes from ggml's src/ggml-common.h block structs and include/ggml.h ids (ggml-org/llama.cpp
// master, 2026-08); they agree with gguf-py 0.19's GGML_QUANT_SIZES where both list a type.
#include "model_data/gguf/ggml_type.h"

#include <iterator>

namespace cherenkov::model_data::gguf {
namespace {

constexpr uint32_t kQkK = 256;  // QK_K: super-block size of the K-quants and IQ types

constexpr GgmlTypeInfo kTypes[] = {
    {0, "F32", 1, 4, false},
    {1, "F16", 1, 2, false},
    {2, "Q4_0", 32, 18, true},        // f16 d; u8 qs[16]
    {3, "Q4_1", 32, 20, true},        // f16 d, m; u8 qs[16]
    {6, "Q5_0", 32, 22, true},        // f16 d; u8 qh[4]; u8 qs[16]
    {7, "Q5_1", 32, 24, true},        // f16 d, m; u8 qh[4]; u8 qs[16]
    {8, "Q8_0", 32, 34, true},        // f16 d; i8 qs[32]
    {9, "Q8_1", 32, 36, true},        // f16 d, s; i8 qs[32]
    {10, "Q2_K", kQkK, 84, true},     // u8 scales[16]; u8 qs[64]; f16 d, dmin
    {11, "Q3_K", kQkK, 110, true},    // u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d
    {12, "Q4_K", kQkK, 144, true},    // f16 d, dmin; u8 scales[12]; u8 qs[128]
    {13, "Q5_K", kQkK, 176, true},    // f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
    {14, "Q6_K", kQkK, 210, true},    // u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
    {15, "Q8_K", kQkK, 292, true},    // f32 d; i8 qs[256]; i16 bsums[16]
    {16, "IQ2_XXS", kQkK, 66, true},  // f16 d; u16 qs[32]
    {17, "IQ2_XS", kQkK, 74, true},   // f16 d; u16 qs[32]; u8 scales[8]
    {18, "IQ3_XXS", kQkK, 98, true},  // f16 d; u8 qs[96]
    {19, "IQ1_S", kQkK, 50, true},    // f16 d; u8 qs[32]; u16 qh[8]
    {20, "IQ4_NL", 32, 18, true},     // f16 d; u8 qs[16]
    {21, "IQ3_S", kQkK, 110, true},   // f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]
    {22, "IQ2_S", kQkK, 82, true},    // f16 d; u8 qs[64]; u8 qh[8]; u8 scales[8]
    {23, "IQ4_XS", kQkK, 136, true},  // f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]
    {24, "I8", 1, 1, false},
    {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},
    {27, "I64", 1, 8, false},
    {28, "F64", 1, 8, false},
    {29, "IQ1_M", kQkK, 56, true},  // u8 qs[32]; u8 qh[16]; u8 scales[8]
    {30, "BF16", 1, 2, false},
    {34, "TQ1_0", kQkK, 54, true},  // u8 qs[48]; u8 qh[4]; f16 d
    {35, "TQ2_0", kQkK, 66, true},  // u8 qs[64]; f16 d
    {39, "MXFP4", 32, 17, true},    // u8 e (E8M0); u8 qs[16] (E2M1)
    {40, "NVFP4", 64, 36, true},    // u8 d[4] (UE4M3 per 16); u8 qs[32] (E2M1)
    {41, "Q1_0", 128, 18, true},    // f16 d; u8 qs[16]
    {42, "Q2_0", 64, 18, true},     // f16 d; u8 qs[16]
};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
    for (const GgmlTypeInfo& type : kTypes) {
        if (type.id == id) return type;
    }
    return std::nullopt;
}

std::span<const GgmlTypeInfo> ggml_types() {
    return {std::begin(kTypes), std::end(kTypes)};
}

}  // namespace cherenkov::model_data::gguf
