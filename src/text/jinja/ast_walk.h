// Visits every expression of a parsed body, telling the visitor whether Jinja2 would compile
// it in a "soft" frame (inside {% if %} or a conditional expression), where unknown filters
// and tests only fail when evaluated.
#pragma once

#include <functional>

#include "text/jinja/ast.h"

namespace cherenkov::text::jinja {

using ExprVisitor = std::function<void(const Expr& expr, bool soft)>;

// `descend_blocks` false skips {% block %} bodies (as Jinja2's name scans do).
void walk_body(const Body& body, bool soft, bool descend_blocks, const ExprVisitor& visit);

}  // namespace cherenkov::text::jinja
