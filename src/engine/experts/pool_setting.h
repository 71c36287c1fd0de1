// `--pool-gb` and `--host-pool-gb` as typed values: parsed once where they enter (the CLI's flags,
// the server's configuration file) and carried as they are down to the backends, so no layer
// below compares the flags' text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cherenkov::engine {

enum class PoolMode {
    Adaptive,  // from available memory (the default)
    Max,       // every record of the table
    Explicit,  // `--pool-gb N`; 0 means no cache (DirectExpertReader)
    Mapped,    // no cache: the expert table used in place (cpu pool, or the host pool of cuda)
    Staging,   // --host-pool-gb only: a few layer-steps that stage reads into the device pool
};

struct PoolSetting {
    PoolMode mode = PoolMode::Adaptive;
    uint64_t bytes = 0;  // Explicit only: N decimal GB in bytes

    static PoolSetting gb(double decimal_gb);  // Explicit, rounded to the byte
    static PoolSetting of(PoolMode mode) { return PoolSetting{.mode = mode}; }
    bool operator==(const PoolSetting&) const = default;
};

// Which flag a setting is given by: the words each takes differ, and messages name the flag.
enum class PoolFlag {
    Pool,      // --pool-gb (experts.pool_gb): adaptive, max, mapped or N
    HostPool,  // --host-pool-gb (experts.host_pool_gb): staging, adaptive, max, mapped or N
};

// Parses a value of `flag`: one of its words, or a decimal number of GB (10^9 bytes, fractions
// allowed: "0.5", "12", "1.25"; surrounding blanks ignored). Throws InvalidInput naming the flag
// and the value otherwise: "--pool-gb 'x': expected a decimal number of GB (...)".
PoolSetting parse_pool_setting(std::string_view text, PoolFlag flag = PoolFlag::Pool);

// The setting as the flag spells it: "adaptive", "max", "mapped", "staging", or the number of
// decimal GB in its shortest form ("12", "0.5"). parse_pool_setting reads it back equal.
std::string pool_setting_text(const PoolSetting& setting);

// "--pool-gb" or "--host-pool-gb".
const char* pool_flag_name(PoolFlag flag);

}  // namespace cherenkov::engine
