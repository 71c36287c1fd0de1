// Template: lexer + parser at construction, a fresh Renderer per render.
#include "text/jinja/template.h"

#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

Template Template::parse(std::string_view source, std::string name) {
    auto body = std::make_shared<const Body>(parse_template(tokenize(source, name), name));
    return Template(std::move(name), std::move(body));
}

std::string Template::render(const Dict& context, const RenderLimits& limits) const {
    Renderer renderer(name_, limits);
    return renderer.render(*body_, context);
}

}  // namespace cherenkov::text::jinja
