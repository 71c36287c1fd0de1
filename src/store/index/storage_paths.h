// Where Cherenkov keeps its files (seed "Storage and downloads"). Defaults follow XDG: data in
// $XDG_DATA_HOME/cherenkov (else ~/.local/share/cherenkov), scratch in $XDG_CACHE_HOME/cherenkov
// (else ~/.cache/cherenkov), configuration in $XDG_CONFIG_HOME/cherenkov/cherenkov.toml (else
// ~/.config/...). An XDG value counts only when absolute. `--root DIR` puts data in DIR, scratch in
// DIR/scratch and configuration in DIR/cherenkov.toml. Resolving paths creates nothing.
#pragma once

#include <string>
#include <string_view>

namespace cherenkov::store {

// The checkpoint that `prepare` and bare `serve` select when no model is named.
inline constexpr std::string_view kDefaultModelRepo = "Sawfwair/Qwen3.8-Flash-Next-MLX-4bit";
inline constexpr std::string_view kDefaultModelCommit = "6cc9bbc0fae9ce26b7670b3ed1e26d557c154506";
std::string default_model_reference();  // "hf://<repo>@<commit>"

// The variables path resolution reads, captured once at the edge (empty = unset).
struct PathEnvironment {
    std::string xdg_data_home;
    std::string xdg_config_home;
    std::string xdg_cache_home;
    std::string home;
    std::string cwd;  // makes a relative --root absolute

    static PathEnvironment from_process();
};

struct StoragePaths {
    std::string data;     // index.json, index.lock, artifacts/, leases/
    std::string scratch;  // transfer scratch; clearing it never touches prepared stores
    std::string config;   // cherenkov.toml (read only by `serve`)

    std::string index_file() const { return data + "/index.json"; }
    std::string lock_file() const { return data + "/index.lock"; }
    std::string artifacts_dir() const { return data + "/artifacts"; }
    std::string leases_dir() const { return data + "/leases"; }
    std::string artifact_dir(const std::string& artifact_id) const;
    std::string lease_file(const std::string& artifact_id) const;
    // Where the deprecated `download` command puts `repo` ("owner/name"):
    // data/downloads/owner/name.
    std::string downloaded_model(std::string_view repo) const;
};

// `root` empty: the XDG defaults. Throws InvalidInput when neither an absolute XDG value nor
// HOME gives a location.
StoragePaths resolve_storage_paths(const std::string& root, const PathEnvironment& env);

}  // namespace cherenkov::store
