// Fuzzes the safetensors container: the input is a whole file. Any cherenkov::Error is an
// accepted rejection; anything else (a crash, another exception type) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "model_data/safetensors/safetensors_file.h"
#include "model_data/sources/memory_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::model_data;
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
    try {
        SafetensorsFile file = SafetensorsFile::open(open_memory_source("fuzz.safetensors", std::move(bytes)));
        for (const auto& tensor : file.tensors()) {
            std::vector<std::byte> head(std::min<uint64_t>(tensor.n_bytes(), 16));
            file.read_tensor_bytes(tensor, 0, head);
        }
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
