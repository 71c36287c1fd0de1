// A parsed Jinja template, rendered the way transformers renders chat templates (Jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loopcontrols and transformers'
// tojson, raise_exception and strftime_now). Parse once, render many times; rendering is
// const and safe to run from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

struct Stmt;

class Template {
public:
    // Throws InvalidInput "<name>:<line>:<column>: <problem>" for a syntax error, an unknown
    // tag, or an unknown filter or test (outside {% if %} branches, as Jinja2 does).
    static Template parse(std::string_view source, std::string name);

    // Renders with `context` as the template's variables. Errors name the template, line and
    // column, except those raised by the template's raise_exception(), which carry its message
    // verbatim. Exceeding a limit throws ResourceExhausted.
    std::string render(const Dict& context, const RenderLimits& limits = {}) const;

    const std::string& name() const { return name_; }

private:
    using Body = std::vector<std::unique_ptr<Stmt>>;
    Template(std::string name, std::shared_ptr<const Body> body)
        : name_(std::move(name)), body_(std::move(body)) {}

    std::string name_;
    std::shared_ptr<const Body> body_;  // shared by copies; never modified after parsing
};

}  // namespace cherenkov::text::jinja
