// The table a builtin type's methods are looked up in (methods.cpp), and the str methods
// (string_methods.cpp).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

using Method = Value (*)(Renderer& renderer, const Value& self, CallArgs& args);
using MethodTable = std::map<std::string, Method, std::less<>>;

const MethodTable& string_methods();

}  // namespace cherenkov::text::jinja
