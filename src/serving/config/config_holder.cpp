#include "serving/config/config_holder.h"

#include "base/error.h"
#include "serving/config/settings_report.h"

namespace cherenkov::serving::config {

ConfigHolder::ConfigHolder(ResolvedConfig startup, std::vector<FlagValue> flags)
    : flags_(std::move(flags)), current_(std::move(startup)) {}

GenerationDefaults ConfigHolder::defaults() const {
    std::lock_guard lock(mutex_);
    return current_.values.defaults;
}

ResolvedConfig ConfigHolder::current() const {
    std::lock_guard lock(mutex_);
    return current_;
}

uint64_t ConfigHolder::generation() const {
    std::lock_guard lock(mutex_);
    return generation_;
}

nlohmann::json ConfigHolder::show() const {
    std::lock_guard lock(mutex_);
    return settings_json(current_, generation_);
}

nlohmann::json ConfigHolder::reload() {
    std::lock_guard reloading(reload_mutex_);
    const ResolvedConfig before = current();
    nlohmann::json result{
        {"ok", false}, {"generation", generation()}, {"changed", nlohmann::json::array()}};
    if (before.file.empty()) {
        result["error"] =
            "reload needs a configuration file: the server started without one (serve --config "
            "FILE, or the default file `cherenkov paths` names)";
        return result;
    }
    ResolvedConfig next;
    try {
        const ConfigFile file = read_config_file(before.file);
        next = resolve_config(&file, flags_);
    } catch (const Error& e) {
        result["error"] = e.what();
        return result;
    }
    std::vector<std::string> changed;
    std::vector<std::string> refused;
    for (const Setting& setting : serve_settings()) {
        if (setting.get(before.values) == setting.get(next.values)) continue;
        (setting.reloadable() ? changed : refused).push_back(setting.key);
    }
    if (!refused.empty()) {
        std::string keys;
        for (const std::string& key : refused) keys += (keys.empty() ? "" : ", ") + key;
        result["error"] = "only [defaults] and [defaults.sampling] can change without a restart; " +
                          before.file + " changes " + keys + " (nothing was reloaded)";
        return result;
    }
    std::lock_guard lock(mutex_);
    // The file's lines and sources may have moved even when no value changed.
    current_ = std::move(next);
    if (!changed.empty()) ++generation_;
    result["ok"] = true;
    result["generation"] = generation_;
    result["changed"] = changed;
    return result;
}

}  // namespace cherenkov::serving::config
