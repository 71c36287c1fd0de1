// Jinja2's statement grammar over the token list: template text, {{ }} output and the tags
// chat templates use (if, for, set, macro, call, filter, with, block, print, break,
// continue, generation). Tags that need a template loader (extends, include, import) and
// unknown tags fail with the template's line and column.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace cherenkov::text::jinja {

Body parse_template(std::vector<Token> tokens, const std::string& template_name);

}  // namespace cherenkov::text::jinja
