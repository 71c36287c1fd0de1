// The ggml tensor types a GGUF file can name (docs/formats.md §4.4): id, name and the block
// geometry needed to size a tensor. Ids that ggml removed (4, 5, 31-33, 36-38) are unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace cherenkov::model_data::gguf {

// One ggml_type. A tensor row of ne[0] elements takes (ne[0] / block_size) * type_size bytes;
// ne[0] must be a multiple of block_size.
struct GgmlTypeInfo {
    uint32_t id = 0;
    std::string_view name;    // upper case, as in ggml.h without the GGML_TYPE_ prefix: "Q4_K"
    uint32_t block_size = 1;  // elements per block
    uint32_t type_size = 0;   // bytes per block
    bool quantized = false;
};

// Returns the type with this id, or nullopt for ids ggml never had or removed.
[[nodiscard]] std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);

// Every known type, ordered by id.
std::span<const GgmlTypeInfo> ggml_types();

}  // namespace cherenkov::model_data::gguf
