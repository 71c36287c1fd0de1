// Fuzzes the store manifest parsers (manifest.json and manifest3/2.json): any text must parse or
// fail with cherenkov::Error, and an accepted manifest must serialize back to one that parses to
// the same expert layout.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "store/manifest/record_layout.h"
#include "store/manifest/store_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::store;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const StoreManifest manifest = parse_store_manifest(text, "manifest.json");
        const StoreManifest again =
            parse_store_manifest(manifest_to_json(manifest).dump(), "manifest.json");
        if (!(again.experts == manifest.experts) || again.dense.size() != manifest.dense.size())
            __builtin_trap();
    } catch (const cherenkov::Error&) {
        // Rejected input: the expected outcome for most mutations.
    }
    try {
        const LowBitManifest manifest = parse_lowbit_manifest(text, "manifest3.json");
        const LowBitManifest again =
            parse_lowbit_manifest(lowbit_manifest_to_json(manifest).dump(), "manifest3.json");
        if (!(again.experts == manifest.experts)) __builtin_trap();
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
