// One-line log messages on stderr with a level and a component tag: `[warn] [safetensors] ...`.
// Stdout belongs to program output. The level is set once, by the CLI.
#pragma once

#include <string_view>

namespace cherenkov {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();

// Parses "error", "warn", "info" or "debug"; throws InvalidInput otherwise.
LogLevel parse_log_level(std::string_view text);

void log_message(LogLevel level, std::string_view component, std::string_view message);

inline void log_error(std::string_view component, std::string_view message) {
    log_message(LogLevel::Error, component, message);
}
inline void log_warn(std::string_view component, std::string_view message) {
    log_message(LogLevel::Warn, component, message);
}
inline void log_info(std::string_view component, std::string_view message) {
    log_message(LogLevel::Info, component, message);
}
inline void log_debug(std::string_view component, std::string_view message) {
    log_message(LogLevel::Debug, component, message);
}

}  // namespace cherenkov
