// Where in a template something is, and the error that names it: "<template>:<line>:<column>:".
#pragma once

#include <string>

namespace cherenkov::text::jinja {

struct SourcePos {
    int line = 1;
    int column = 1;  // in code points, 1-based
};

// "<template_name>:<line>:<column>"
std::string describe_pos(const std::string& template_name, SourcePos pos);

// Throws InvalidInput "<template_name>:<line>:<column>: <message>".
[[noreturn]] void throw_template_error(const std::string& template_name, SourcePos pos,
                                       const std::string& message);

}  // namespace cherenkov::text::jinja
