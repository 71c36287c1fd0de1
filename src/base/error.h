// The project's one exception type: a kind plus a message whose parts read outer to inner.
// Thrown where a failure is found; caught only at the edges (CLI main, HTTP handler, worker loop).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace cherenkov {

enum class ErrorKind {
    InvalidInput,
    NotFound,
    Corrupt,
    Io,
    Unsupported,
    Busy,
    ResourceExhausted,
    Cancelled,
    Internal,
};

std::string_view error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message);

    ErrorKind kind() const { return kind_; }

    // Returns a copy whose message is "<context>: <this message>", keeping the kind.
    // Used once per layer while unwinding: `catch (Error& e) { throw e.with_context(path); }`.
    Error with_context(std::string_view context) const;

private:
    ErrorKind kind_;
};

// Shorthands for the common kinds, so call sites read as the condition they report.
[[noreturn]] void throw_invalid(const std::string& message);
[[noreturn]] void throw_corrupt(const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& message);
[[noreturn]] void throw_not_found(const std::string& message);
[[noreturn]] void throw_io(const std::string& message);
[[noreturn]] void throw_internal(const std::string& message);

// Throws Io with "<what>: <strerror(errno_value)>".
[[noreturn]] void throw_errno(const std::string& what, int errno_value);

}  // namespace cherenkov

// Cheap invariant that stays on in release builds; never for user input (docs/style.md 2.4).
#define CHERENKOV_ASSERT(cond, why)                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            ::cherenkov::throw_internal(std::string("assertion failed: ") + #cond + " (" + \
                                        (why) + ") at " + __FILE__ + ":" +                   \
                                        std::to_string(__LINE__));                           \
        }                                                                                    \
    } while (0)
