// Template error locations.
#include "text/jinja/source_pos.h"

#include "base/error.h"

namespace cherenkov::text::jinja {

std::string describe_pos(const std::string& template_name, SourcePos pos) {
    return template_name + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

void throw_template_error(const std::string& template_name, SourcePos pos,
                          const std::string& message) {
    throw_invalid(describe_pos(template_name, pos) + ": " + message);
}

}  // namespace cherenkov::text::jinja
