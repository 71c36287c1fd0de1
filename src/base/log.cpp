#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "base/error.h"

namespace cherenkov {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
// Guards stderr so lines from IO threads and the worker never interleave.
std::mutex g_stderr_mutex;

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Error: return "error";
        case LogLevel::Warn: return "warn";
        case LogLevel::Info: return "info";
        case LogLevel::Debug: return "debug";
    }
    return "?";
}

}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

LogLevel parse_log_level(std::string_view text) {
    if (text == "error") return LogLevel::Error;
    if (text == "warn") return LogLevel::Warn;
    if (text == "info") return LogLevel::Info;
    if (text == "debug") return LogLevel::Debug;
    throw_invalid("unknown log level '" + std::string(text) + "' (expected error, warn, info or debug)");
}

void log_message(LogLevel level, std::string_view component, std::string_view message) {
    if (static_cast<int>(level) > g_level.load()) return;
    std::lock_guard<std::mutex> lock(g_stderr_mutex);
    std::fprintf(stderr, "[%s] [%.*s] %.*s\n", level_name(level), static_cast<int>(component.size()),
                 component.data(), static_cast<int>(message.size()), message.data());
}

}  // namespace cherenkov
