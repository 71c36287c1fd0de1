// Fuzzes the checkpoint JSON files read next to the safetensors: the shard index
// (model.safetensors.index.json) and MLX quantization configs in config.json, and the
// logical-tensor assembly they drive. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "model_data/encodings/logical_tensor.h"
#include "model_data/encodings/quantization_config.h"
#include "model_data/safetensors/safetensors_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::model_data;
    if (size == 0) return 0;
    std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        if (data[0] % 2 == 0) {
            parse_shard_index(text, "model.safetensors.index.json");
            return 0;
        }
        auto document = nlohmann::json::parse(text, nullptr, false);
        if (document.is_discarded() || !document.is_object()) return 0;
        auto quantization = parse_quantization_config(document, "config.json");
        // Drive the assembly with tensors whose shapes come from the document's numbers.
        std::vector<StoredTensor> tensors = {
            {"m.weight", Dtype::U32, {static_cast<uint64_t>(size % 7 + 1), static_cast<uint64_t>(size % 5)}},
            {"m.scales", Dtype::BF16, {static_cast<uint64_t>(size % 7 + 1), static_cast<uint64_t>(size % 3)}},
            {"m.biases", Dtype::BF16, {static_cast<uint64_t>(size % 7 + 1), static_cast<uint64_t>(size % 3)}}};
        assemble_logical_tensors(tensors, quantization, "fuzz");
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
