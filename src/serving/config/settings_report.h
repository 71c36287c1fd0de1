// The resolved settings as the control socket's config_show answers them (JSON) and as
// `serve --print-config` and `cherenkov config show` print them (TOML that is itself a valid
// configuration file, each value followed by where it came from).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serving/config/resolved_config.h"

namespace cherenkov::serving::config {

// {"file": PATH or null, "generation": N, "settings": {"server": {"host": ..., ...}, ...,
//  "defaults": {"max_tokens": ..., "sampling": {...}}}, "sources": {"server.host": "default"}}.
// Amounts that are numbers are JSON numbers; words stay strings.
nlohmann::json settings_json(const ResolvedConfig& config, uint64_t generation);

// TOML for a settings_json() object: every section and key in the catalogue's order, each line
// "key = value  # source (--flag)". Keys missing from `settings` are left out.
std::string settings_toml(const nlohmann::json& settings);

}  // namespace cherenkov::serving::config
