#include "store/index/storage_paths.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

std::string clean(const fs::path& path) {
    std::string text = path.lexically_normal().string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
}

// $XDG_<x>/cherenkov when the value is absolute, else $HOME/<fallback>/cherenkov.
std::string xdg_dir(const std::string& xdg_value, const std::string& home,
                    const char* home_relative, const char* variable) {
    if (!xdg_value.empty() && fs::path(xdg_value).is_absolute()) {
        return clean(fs::path(xdg_value) / "cherenkov");
    }
    if (home.empty() || !fs::path(home).is_absolute()) {
        throw_invalid(std::string("cannot place Cherenkov's files: ") + variable +
                      " is not an absolute path and HOME is not set (pass --root DIR)");
    }
    return clean(fs::path(home) / home_relative / "cherenkov");
}

}  // namespace

std::string default_model_reference() {
    return "hf://" + std::string(kDefaultModelRepo) + "@" + std::string(kDefaultModelCommit);
}

PathEnvironment PathEnvironment::from_process() {
    PathEnvironment env;
    env.xdg_data_home = env_or_empty("XDG_DATA_HOME");
    env.xdg_config_home = env_or_empty("XDG_CONFIG_HOME");
    env.xdg_cache_home = env_or_empty("XDG_CACHE_HOME");
    env.home = env_or_empty("HOME");
    std::error_code ec;
    env.cwd = fs::current_path(ec).string();
    return env;
}

std::string StoragePaths::artifact_dir(const std::string& artifact_id) const {
    return artifacts_dir() + "/" + artifact_id;
}

std::string StoragePaths::lease_file(const std::string& artifact_id) const {
    return leases_dir() + "/" + artifact_id;
}

std::string StoragePaths::downloaded_model(std::string_view repo) const {
    return data + "/downloads/" + std::string(repo);
}

StoragePaths resolve_storage_paths(const std::string& root, const PathEnvironment& env) {
    StoragePaths paths;
    if (!root.empty()) {
        fs::path base(root);
        if (!base.is_absolute()) {
            if (env.cwd.empty()) throw_invalid("--root " + root + ": cannot make it absolute");
            base = fs::path(env.cwd) / base;
        }
        paths.data = clean(base);
        paths.scratch = clean(base / "scratch");
        paths.config = clean(base / "cherenkov.toml");
        return paths;
    }
    paths.data = xdg_dir(env.xdg_data_home, env.home, ".local/share", "XDG_DATA_HOME");
    paths.scratch = xdg_dir(env.xdg_cache_home, env.home, ".cache", "XDG_CACHE_HOME");
    paths.config =
        xdg_dir(env.xdg_config_home, env.home, ".config", "XDG_CONFIG_HOME") + "/cherenkov.toml";
    return paths;
}

}  // namespace cherenkov::store
