// Fuzzes `--tuning key=value` settings (engine/tuning.h): one setting per input line; any text
// must apply or fail with cherenkov::Error, and what is accepted must survive its own inverse.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::engine;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> settings;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        settings.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    try {
        const Tuning tuning = parse_tuning(settings);
        if (tuning.io_piece_kib < -1) __builtin_trap();
        if (!(parse_tuning(tuning_settings(tuning)) == tuning)) __builtin_trap();
    } catch (const cherenkov::Error&) {
    }
    return 0;
}
