// What `cherenkov inspect` prints for a GGUF file: a complete JSON description and a readable
// text report. GGUF is inspected only; the engine never converts or runs it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model_data/gguf/gguf_file.h"

namespace cherenkov::model_data::inspect {

// {"format":"gguf", "path", "version", "alignment", "header_bytes", "data_offset", "file_size",
//  "architecture" (string or null), "metadata": {key: value}, "metadata_types": {key: "uint32" |
//  "array[string]" | ...}, "tensors": [{"name", "shape" (row-major), "ggml_type", "type_id",
//  "offset" (absolute), "relative_offset", "n_elements", "n_bytes"}], "engine_support"}.
// Integers keep their signedness and full 64 bits; float32 values print as their shortest
// round-trip decimal; NaN and infinities become null; strings that are not valid UTF-8 have
// each bad byte replaced by U+FFFD so the JSON always serializes.
nlohmann::json gguf_report_json(const gguf::GgufFile& file);

// Header facts, metadata (long arrays and strings abbreviated), a tensor table and byte totals
// by ggml type; ends with a newline.
std::string gguf_report_text(const gguf::GgufFile& file);

}  // namespace cherenkov::model_data::inspect
