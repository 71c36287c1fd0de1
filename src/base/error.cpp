#include "base/error.h"

#include <cstring>

namespace cherenkov {

std::string_view error_kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::InvalidInput: return "invalid input";
        case ErrorKind::NotFound: return "not found";
        case ErrorKind::Corrupt: return "corrupt";
        case ErrorKind::Io: return "io error";
        case ErrorKind::Unsupported: return "unsupported";
        case ErrorKind::Busy: return "busy";
        case ErrorKind::ResourceExhausted: return "resource exhausted";
        case ErrorKind::Cancelled: return "cancelled";
        case ErrorKind::Internal: return "internal error";
    }
    return "internal error";
}

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

Error Error::with_context(std::string_view context) const {
    std::string message(context);
    message += ": ";
    message += what();
    return Error(kind_, message);
}

void throw_invalid(const std::string& message) { throw Error(ErrorKind::InvalidInput, message); }
void throw_corrupt(const std::string& message) { throw Error(ErrorKind::Corrupt, message); }
void throw_unsupported(const std::string& message) { throw Error(ErrorKind::Unsupported, message); }
void throw_not_found(const std::string& message) { throw Error(ErrorKind::NotFound, message); }
void throw_io(const std::string& message) { throw Error(ErrorKind::Io, message); }
void throw_internal(const std::string& message) { throw Error(ErrorKind::Internal, message); }

void throw_errno(const std::string& what, int errno_value) {
    throw Error(errno_value == ENOENT ? ErrorKind::NotFound : ErrorKind::Io,
                what + ": " + std::strerror(errno_value));
}

}  // namespace cherenkov
