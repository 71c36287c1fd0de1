#include "serving/config/resolved_config.h"

#include "base/error.h"

namespace cherenkov::serving::config {
namespace {

void check_combinations(const ResolvedConfig& config) {
    const ServeConfig& v = config.values;
    if (!v.server.model.empty() && !v.server.model_dir.empty()) {
        throw_invalid(config.origin("server.model") + " and " + config.origin("server.model_dir") +
                      " are exclusive: name the model one way");
    }
    // Mixed mode keeps Q4 residents and reads only unpredicted misses at lower precision.
    const int64_t resident = v.experts.resident_bits;
    const int64_t miss = v.experts.miss_bits;
    if (miss != 0 && miss != resident && resident != 4) {
        throw_invalid(config.origin("experts.miss_bits") + " = " + std::to_string(miss) +
                      " needs 4-bit residents, but " + config.origin("experts.resident_bits") +
                      " = " + std::to_string(resident));
    }
    if (v.defaults.max_tokens >= v.server.max_ctx) {
        throw_invalid(config.origin("defaults.max_tokens") + " = " +
                      std::to_string(v.defaults.max_tokens) + " leaves no room for a prompt in " +
                      config.origin("server.max_ctx") + " = " + std::to_string(v.server.max_ctx));
    }
}

}  // namespace

std::string_view source_name(SettingSource source) {
    switch (source) {
        case SettingSource::Default: return "default";
        case SettingSource::File: return "file";
        case SettingSource::Flag: return "flag";
    }
    return "default";
}

SettingSource ResolvedConfig::source(std::string_view key) const {
    const auto it = sources.find(key);
    return it == sources.end() ? SettingSource::Default : it->second;
}

std::string ResolvedConfig::origin(std::string_view key) const {
    switch (source(key)) {
        case SettingSource::File:
            return std::string(key) + " (" + file + ":" + std::to_string(lines.find(key)->second) +
                   ")";
        case SettingSource::Flag: return flags.find(key)->second;
        case SettingSource::Default: break;
    }
    return std::string(key) + " (default)";
}

ResolvedConfig resolve_config(const ConfigFile* file, const std::vector<FlagValue>& flags) {
    ResolvedConfig config;
    for (const Setting& setting : serve_settings()) {
        config.sources[setting.key] = SettingSource::Default;
    }
    if (file != nullptr) {
        config.file = file->path;
        for (const FileValue& value : file->values) {
            value.setting->set(config.values, value.value);
            config.sources[value.setting->key] = SettingSource::File;
            config.lines[value.setting->key] = value.line;
        }
    }
    for (const FlagValue& flag : flags) {
        const Setting* setting = find_setting(flag.key);
        CHERENKOV_ASSERT(setting != nullptr, "a flag maps to an unknown key: " + flag.key);
        setting->set(config.values, check_value(*setting, flag.value, flag.flag));
        config.sources[setting->key] = SettingSource::Flag;
        config.flags[setting->key] = flag.flag;
    }
    check_combinations(config);
    return config;
}

}  // namespace cherenkov::serving::config
