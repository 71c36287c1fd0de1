// A `cherenkov serve` configuration file (TOML; docs/configuration.md) read into the values it
// sets. Every key must be one of the catalogue's (settings_catalog.h), of the right type and in
// range; any other content is an error naming the file, the line and the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serving/config/settings_catalog.h"

namespace cherenkov::serving::config {

struct FileValue {
    const Setting* setting = nullptr;
    SettingValue value;  // checked and canonical; relative paths already resolved
    uint32_t line = 0;
};

struct ConfigFile {
    std::string path;  // as read (absolute for read_config_file)
    std::vector<FileValue> values;

    const FileValue* find(std::string_view key) const;
};

// Parses `text` as the file at `path`: messages name `path`, and relative paths in it resolve
// from its folder. Throws InvalidInput "PATH:LINE: KEY: why" (TOML syntax errors:
// "PATH:LINE:COLUMN: why").
ConfigFile parse_config_text(std::string_view text, const std::string& path);

// Reads and parses the file at `path` (made absolute first). Throws NotFound when it is missing,
// Io when it cannot be read, and as parse_config_text.
ConfigFile read_config_file(const std::string& path);

}  // namespace cherenkov::serving::config
