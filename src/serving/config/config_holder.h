// The running server's configuration, shared by the HTTP threads (which snapshot the generation
// defaults for each request), the control socket (config_show, config_reload) and SIGHUP.
// Reload rereads the startup file, reapplies the startup flags and validates everything before
// replacing anything; only [defaults] and [defaults.sampling] may change (docs/configuration.md
// "Reload"). Every method may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "serving/config/resolved_config.h"

namespace cherenkov::serving::config {

class ConfigHolder {
public:
    // `startup` as resolved at startup from its file (if any) and `flags`.
    ConfigHolder(ResolvedConfig startup, std::vector<FlagValue> flags);

    // What a request starting now takes as its defaults (a copy: it keeps it to the end).
    GenerationDefaults defaults() const;
    // The current settings (startup ones, with the reloaded defaults).
    ResolvedConfig current() const;
    uint64_t generation() const;

    // settings_json() of the current settings, with their generation.
    nlohmann::json show() const;

    // {"ok": true, "generation": N, "changed": ["defaults.sampling.temperature", ...]} or
    // {"ok": false, "generation": N, "changed": [], "error": "why"}. The generation grows only
    // when a value changed. A failed reload (no startup file, unreadable or invalid file, a
    // change outside [defaults]) changes nothing.
    nlohmann::json reload();

private:
    std::vector<FlagValue> flags_;
    mutable std::mutex reload_mutex_;  // one reload at a time (held while the file is read)
    mutable std::mutex mutex_;         // guards current_ and generation_
    ResolvedConfig current_;
    uint64_t generation_ = 1;
};

}  // namespace cherenkov::serving::config
