// Renders a parsed chat template with jinja2's semantics under transformers'
// sandboxed environment: scoping (a `set` inside a loop stays in that
// iteration; namespace() carries values out), jinja2's default Undefined
// (prints as "", is falsy and iterates as empty, but using it in arithmetic or
// reading an attribute of it is an error), the loopcontrols extension
// (break/continue), and transformers' globals raise_exception, strftime_now,
// namespace and dict, and its tojson filter.
#pragma once

#include "ChatTemplateAst.h"

#include <string>

namespace ninfer {
namespace jinja {

// Throws TemplateError with the line of the failing statement.
std::string render(const Template& tmpl, const Dict& variables);

} // namespace jinja
} // namespace ninfer
