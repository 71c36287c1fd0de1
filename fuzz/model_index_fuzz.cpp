// Fuzzes the model index catalog parser (data/index.json): any text must parse or fail with
// cherenkov::Error, and an accepted catalog must serialize to text that parses to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "store/index/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::store;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const Catalog catalog = parse_catalog(text, "index.json");
        const std::string once = catalog_to_text(catalog);
        if (catalog_to_text(parse_catalog(once, "index.json")) != once) __builtin_trap();
    } catch (const cherenkov::Error&) {
        // Rejected input: the expected outcome for most mutations.
    }
    return 0;
}
