#include "serving/config/settings_report.h"

#include <charconv>
#include <cstdio>
#include <sstream>

namespace cherenkov::serving::config {
namespace {

nlohmann::json value_json(const Setting& setting, const SettingValue& value) {
    if (const auto* b = std::get_if<bool>(&value)) return *b;
    if (const auto* i = std::get_if<int64_t>(&value)) return *i;
    if (const auto* d = std::get_if<double>(&value)) return *d;
    const std::string& text = std::get<std::string>(value);
    if (setting.kind == ValueKind::Amount) {
        int64_t whole = 0;
        auto result = std::from_chars(text.data(), text.data() + text.size(), whole);
        if (!text.empty() && result.ec == std::errc() && result.ptr == text.data() + text.size())
            return whole;
        double real = 0;
        result = std::from_chars(text.data(), text.data() + text.size(), real);
        if (!text.empty() && result.ec == std::errc() && result.ptr == text.data() + text.size())
            return real;
    }
    return text;
}

// The JSON pointer of a key inside "settings": /defaults/sampling/top_p.
nlohmann::json::json_pointer pointer(const std::string& key) {
    std::string path = "/" + key;
    for (char& c : path) {
        if (c == '.') c = '/';
    }
    return nlohmann::json::json_pointer(path);
}

// A TOML basic string. JSON's escapes would do but for DEL, which TOML also wants escaped.
std::string toml_string(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (byte < 0x20 || byte == 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

}  // namespace

nlohmann::json settings_json(const ResolvedConfig& config, uint64_t generation) {
    nlohmann::json out;
    out["file"] = config.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(config.file);
    out["generation"] = generation;
    nlohmann::json settings = nlohmann::json::object();
    nlohmann::json sources = nlohmann::json::object();
    for (const Setting& setting : serve_settings()) {
        settings[pointer(setting.key)] = value_json(setting, setting.get(config.values));
        sources[setting.key] = std::string(source_name(config.source(setting.key)));
    }
    out["settings"] = std::move(settings);
    out["sources"] = std::move(sources);
    return out;
}

std::string settings_toml(const nlohmann::json& report) {
    std::ostringstream out;
    const nlohmann::json& settings = report.value("settings", nlohmann::json::object());
    const nlohmann::json& sources = report.value("sources", nlohmann::json::object());
    std::string section;
    for (const Setting& setting : serve_settings()) {
        const auto at = pointer(setting.key);
        if (!settings.contains(at)) continue;
        if (setting.section() != section) {
            section = setting.section();
            out << (out.tellp() > 0 ? "\n" : "") << "[" << section << "]\n";
        }
        // JSON's numbers and booleans are TOML's.
        const nlohmann::json& value = settings.at(at);
        out << setting.name() << " = "
            << (value.is_string() ? toml_string(value.get<std::string>()) : value.dump()) << "  # "
            << sources.value(setting.key, "default");
        if (!setting.flag.empty()) out << " (" << setting.flag << ")";
        out << "\n";
    }
    return out.str();
}

}  // namespace cherenkov::serving::config
