// Fuzzes the `cherenkov serve` configuration loader (serving/config/): every input must either
// load and resolve, or fail with cherenkov::Error (InvalidInput) naming the file; an accepted
// configuration, printed back as TOML, must load again to the same values. Any other exception
// or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "serving/config/config_file.h"
#include "serving/config/resolved_config.h"
#include "serving/config/settings_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace cherenkov::serving::config;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::string path = "/fuzz/cherenkov.toml";
    ResolvedConfig resolved;
    try {
        const ConfigFile file = parse_config_text(text, path);
        resolved = resolve_config(&file, {});
    } catch (const cherenkov::Error& e) {
        const std::string message = e.what();
        if (e.kind() != cherenkov::ErrorKind::InvalidInput ||
            message.find(path) == std::string::npos) {
            std::fprintf(stderr, "unexpected error: %s\n", message.c_str());
            std::abort();
        }
        return 0;
    }
    // The printed settings are a configuration file that loads to the same values.
    const std::string printed = settings_toml(settings_json(resolved, 1));
    try {
        const ConfigFile again = parse_config_text(printed, path);
        const ResolvedConfig back = resolve_config(&again, {});
        for (const Setting& setting : serve_settings()) {
            if (setting.get(back.values) != setting.get(resolved.values)) {
                std::fprintf(stderr, "%s changed when printed:\n%s", setting.key.c_str(),
                             printed.c_str());
                std::abort();
            }
        }
    } catch (const cherenkov::Error& e) {
        std::fprintf(stderr, "printed settings do not load: %s\n%s", e.what(), printed.c_str());
        std::abort();
    }
    return 0;
}
