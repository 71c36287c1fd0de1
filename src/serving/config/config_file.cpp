#include "serving/config/config_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"

namespace cherenkov::serving::config {
namespace {

bool is_section(std::string_view key) {
    const auto& sections = setting_sections();
    return std::find(sections.begin(), sections.end(), key) != sections.end();
}

std::string type_name(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::table: return "a table";
        case toml::node_type::array: return "an array";
        case toml::node_type::date: return "a date";
        case toml::node_type::time: return "a time";
        case toml::node_type::date_time: return "a date-time";
        default: return "a value";
    }
}

class Reader {
public:
    Reader(const std::string& path, ConfigFile& out) : path_(path), out_(out) {}

    void walk(const toml::table& table, const std::string& prefix) {
        for (auto&& [name, node] : table) {
            const std::string key =
                prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
            const uint32_t line =
                name.source().begin.line != 0 ? name.source().begin.line : node.source().begin.line;
            const Setting* setting = find_setting(key);
            if (const toml::table* inner = node.as_table()) {
                if (is_section(key)) {
                    walk(*inner, key);
                    continue;
                }
                if (setting != nullptr) fail(line, key, "must be a value, got a table");
                unknown(line, key);
            }
            if (setting == nullptr) {
                if (is_section(key)) fail(line, key, "must be a table ([" + key + "])");
                unknown(line, key);
            }
            SettingValue value;
            if (const auto* b = node.as_boolean()) {
                value = b->get();
            } else if (const auto* i = node.as_integer()) {
                value = i->get();
            } else if (const auto* d = node.as_floating_point()) {
                value = d->get();
            } else if (const auto* s = node.as_string()) {
                value = s->get();
            } else {
                fail(line, key, "must be a single value, got " + type_name(node));
            }
            value = check_value(*setting, value, where(line) + ": " + key);
            if (setting->path) value = resolve_path(std::get<std::string>(value));
            out_.values.push_back({setting, std::move(value), line});
        }
    }

private:
    std::string where(uint32_t line) const { return path_ + ":" + std::to_string(line); }

    [[noreturn]] void fail(uint32_t line, const std::string& key, const std::string& why) const {
        throw_invalid(where(line) + ": " + key + ": " + why);
    }

    // Names the table a misplaced key belongs in ("port" at the top level: [server]).
    [[noreturn]] void unknown(uint32_t line, const std::string& key) const {
        std::string hint;
        const std::string_view leaf = std::string_view(key).substr(key.rfind('.') + 1);
        for (const Setting& setting : serve_settings()) {
            if (setting.name() == leaf) {
                hint = " (did you mean " + setting.key + ", in [" + std::string(setting.section()) +
                       "]?)";
                break;
            }
        }
        throw_invalid(where(line) + ": unknown key '" + key + "'" + hint);
    }

    // Relative paths in the file are relative to its folder (an empty value means "unset").
    std::string resolve_path(const std::string& value) const {
        if (value.empty() || std::filesystem::path(value).is_absolute()) return value;
        return (std::filesystem::path(path_).parent_path() / value).lexically_normal().string();
    }

    const std::string& path_;
    ConfigFile& out_;
};

}  // namespace

const FileValue* ConfigFile::find(std::string_view key) const {
    for (const FileValue& value : values) {
        if (value.setting->key == key) return &value;
    }
    return nullptr;
}

ConfigFile parse_config_text(std::string_view text, const std::string& path) {
    ConfigFile file;
    file.path = path;
    toml::table root;
    try {
        root = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
        const toml::source_position at = e.source().begin;
        throw_invalid(path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                      ": " + std::string(e.description()));
    }
    Reader(file.path, file).walk(root, "");
    return file;
}

ConfigFile read_config_file(const std::string& path) {
    namespace fs = std::filesystem;
    const std::string absolute = fs::absolute(path).lexically_normal().string();
    std::error_code ec;
    if (!fs::exists(absolute, ec)) throw_not_found(absolute + ": no such configuration file");
    if (fs::is_directory(absolute, ec)) {
        throw_invalid(absolute + ": is a directory, not a configuration file");
    }
    return parse_config_text(read_text_file(absolute), absolute);
}

}  // namespace cherenkov::serving::config
