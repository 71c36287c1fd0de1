// Fuzzes model selectors (alias / ID / hf:// / disk:// / paths) and HF cache ref files: any text
// must parse or fail with cherenkov::Error; accepted URIs never keep a query, fragment, escape or
// dot segment.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "store/index/selector.h"

namespace {

bool has_dot_segment(std::string_view text) {
    size_t start = 0;
    while (start <= text.size()) {
        const size_t slash = std::min(text.find('/', start), text.size());
        const std::string_view segment = text.substr(start, slash - start);
        if (segment == "." || segment == "..") return true;
        start = slash + 1;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::store;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const Selector selector = parse_selector(text);
        if (selector.kind == SelectorKind::Hf || selector.kind == SelectorKind::Disk) {
            const std::string& repo =
                selector.kind == SelectorKind::Hf ? selector.hf.repo : selector.disk.repo;
            const auto& revision =
                selector.kind == SelectorKind::Hf ? selector.hf.revision : selector.disk.revision;
            const std::string all = repo + "/" + revision.value_or("x");
            if (all.find_first_of("?#%") != std::string::npos || has_dot_segment(all))
                __builtin_trap();
        }
    } catch (const cherenkov::Error&) {
    }
    try {
        const std::string commit = parse_cache_ref(text, "refs/main");
        if (commit.size() != 40) __builtin_trap();
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
