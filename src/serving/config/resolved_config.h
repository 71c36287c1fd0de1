// The settings `cherenkov serve` runs with: built-in defaults, overridden by the configuration
// file, overridden by the flags given on the command line (given at all, even when equal to the
// default). Records where each value came from, and checks the combinations no single value
// shows wrong (docs/configuration.md "Precedence").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "serving/config/config_file.h"
#include "serving/config/serve_config.h"

namespace cherenkov::serving::config {

enum class SettingSource { Default, File, Flag };

std::string_view source_name(SettingSource source);

// A value given on the command line for the setting with `key`; `flag` names it in messages
// ("--max-active", or "MODEL" for the positional model).
struct FlagValue {
    std::string key;
    SettingValue value;
    std::string flag;
};

struct ResolvedConfig {
    ServeConfig values;
    std::string file;  // the configuration file read (absolute), empty when none
    // Per key: where its value came from, and the file line for File.
    std::map<std::string, SettingSource, std::less<>> sources;
    std::map<std::string, uint32_t, std::less<>> lines;
    std::map<std::string, std::string, std::less<>> flags;  // the flag for Flag values

    SettingSource source(std::string_view key) const;
    // How messages name where a key's value came from: "limits.max_active (cfg.toml:3)",
    // "--max-active", "limits.max_active (default)".
    std::string origin(std::string_view key) const;
};

// Defaults, then `file` (may be null), then `flags` in order. Flag values are checked as file
// values are (InvalidInput naming the flag); then the combinations: server.model and
// server.model_dir exclusive, mixed precision with 4-bit residents, defaults.max_tokens below
// server.max_ctx (InvalidInput naming every key involved and where each came from).
ResolvedConfig resolve_config(const ConfigFile* file, const std::vector<FlagValue>& flags);

}  // namespace cherenkov::serving::config
