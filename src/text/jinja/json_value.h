// Conversion of JSON documents (messages, tools, extra template variables) into interpreter
// values, keeping object key order as Python's json module does.
#pragma once

#include <nlohmann/json.hpp>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// Throws InvalidInput for integers outside the 64-bit range and for documents nested deeper
// than kMaxValueDepth.
Value value_from_json(const nlohmann::ordered_json& json);

}  // namespace cherenkov::text::jinja
