// A GGUF v2/v3 file described from its header (docs/formats.md §4): metadata with exact value
// types, tensor infos with row-major shapes and absolute byte ranges. Inspection only; the
// engine never runs GGUF weights. The header is read through a ByteSource in chunks, so a remote
// source fetches only header bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_data/gguf/ggml_type.h"
#include "model_data/gguf/gguf_value.h"
#include "model_data/sources/byte_source.h"

namespace cherenkov::model_data::gguf {

struct GgufMetadataEntry {
    std::string key;
    GgufValue value;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<uint64_t> shape;  // row-major, outermost first: ne[] reversed
    GgmlTypeInfo type;
    uint64_t relative_offset = 0;  // from the start of the data section, as stored
    uint64_t file_offset = 0;      // absolute byte offset in the file
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
};

struct GgufFile {
    std::string path;  // the source's name
    uint32_t version = 0;
    uint64_t file_size = 0;
    uint32_t alignment = 32;                  // general.alignment, or 32
    uint64_t header_bytes = 0;                // magic through the last tensor info, before padding
    uint64_t data_offset = 0;                 // start of the data section (header_bytes rounded up)
    std::vector<GgufMetadataEntry> metadata;  // in file order; keys are unique
    std::vector<GgufTensorInfo> tensors;      // in file order; names are unique

    // The value stored under `key`, or null.
    const GgufValue* find(std::string_view key) const;
    // general.architecture when present as a string.
    std::optional<std::string> architecture() const;
};

// Reads and validates the header of the GGUF file behind `source`. Throws Corrupt (malformed or
// truncated), Unsupported (version 1, big-endian files, unknown ggml types, deep array nesting)
// with messages naming source.name(), the field and the byte offset.
GgufFile read_gguf(const ByteSource& source);

}  // namespace cherenkov::model_data::gguf
