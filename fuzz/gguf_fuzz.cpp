// Fuzzes the GGUF header reader and both reports: any input must either parse or throw
// cherenkov::Error; anything else (another exception, a crash, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "model_data/gguf/gguf_file.h"
#include "model_data/inspect/gguf_report.h"
#include "model_data/sources/memory_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto* begin = reinterpret_cast<const std::byte*>(data);
    auto source = cherenkov::model_data::open_memory_source(
        "fuzz.gguf", std::vector<std::byte>(begin, begin + size));
    try {
        const auto file = cherenkov::model_data::gguf::read_gguf(*source);
        // dump() throws nlohmann::json::type_error on invalid UTF-8; the report must prevent it.
        const std::string json = cherenkov::model_data::inspect::gguf_report_json(file).dump();
        const std::string text = cherenkov::model_data::inspect::gguf_report_text(file);
        if (json.empty() || text.empty()) __builtin_trap();
    } catch (const cherenkov::Error& e) {
        // Rejected input is the expected outcome for most of the space; Internal means a
        // CHERENKOV_ASSERT fired, which is a bug.
        if (e.kind() == cherenkov::ErrorKind::Internal) __builtin_trap();
    }
    return 0;
}
