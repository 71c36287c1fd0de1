#include "model_data/safetensors/dtype.h"

#include <array>
#include <utility>

namespace cherenkov::model_data {
namespace {

struct DtypeInfo {
    Dtype dtype;
    std::string_view name;
    int bits;
    bool is_float;
};

constexpr std::array<DtypeInfo, 22> kDtypes = {{
    {Dtype::Bool, "BOOL", 8, false},
    {Dtype::U8, "U8", 8, false},
    {Dtype::I8, "I8", 8, false},
    {Dtype::I16, "I16", 16, false},
    {Dtype::U16, "U16", 16, false},
    {Dtype::F16, "F16", 16, true},
    {Dtype::BF16, "BF16", 16, true},
    {Dtype::I32, "I32", 32, false},
    {Dtype::U32, "U32", 32, false},
    {Dtype::F32, "F32", 32, true},
    {Dtype::I64, "I64", 64, false},
    {Dtype::U64, "U64", 64, false},
    {Dtype::F64, "F64", 64, true},
    {Dtype::C64, "C64", 64, true},
    {Dtype::F8_E4M3, "F8_E4M3", 8, true},
    {Dtype::F8_E5M2, "F8_E5M2", 8, true},
    {Dtype::F8_E8M0, "F8_E8M0", 8, true},
    {Dtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, true},
    {Dtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, true},
    {Dtype::F4, "F4", 4, true},
    {Dtype::F6_E2M3, "F6_E2M3", 6, true},
    {Dtype::F6_E3M2, "F6_E3M2", 6, true},
}};

const DtypeInfo& info(Dtype dtype) {
    for (const auto& entry : kDtypes) {
        if (entry.dtype == dtype) return entry;
    }
    return kDtypes[0];  // unreachable: every enumerator has a row
}

}  // namespace

std::optional<Dtype> parse_dtype(std::string_view name) {
    for (const auto& entry : kDtypes) {
        if (entry.name == name) return entry.dtype;
    }
    return std::nullopt;
}

std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }
int dtype_bits(Dtype dtype) { return info(dtype).bits; }
bool dtype_is_float(Dtype dtype) { return info(dtype).is_float; }

}  // namespace cherenkov::model_data
