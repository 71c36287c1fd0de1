// Helpers for the Jinja tests: render a template over a JSON context, or capture its error.
// Expected strings in these tests are what Jinja2 3.1.6 (as transformers configures it)
// produces; tests/text/test_chat_templates.py checks the same behaviour against Jinja2 itself.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace cherenkov::text::jinja::testing {

inline std::string render(const std::string& source,
                          const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                          const RenderLimits& limits = {}) {
    Template compiled = Template::parse(source, "t.jinja");
    return compiled.render(value_from_json(context).as_dict(), limits);
}

// The message of the Error rendering throws, or "<no error>".
inline std::string render_error(
    const std::string& source,
    const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
    const RenderLimits& limits = {}) {
    try {
        render(source, context, limits);
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

inline ErrorKind render_error_kind(const std::string& source, const RenderLimits& limits = {}) {
    try {
        render(source, nlohmann::ordered_json::object(), limits);
    } catch (const Error& e) {
        return e.kind();
    }
    return ErrorKind::Internal;
}

}  // namespace cherenkov::text::jinja::testing
