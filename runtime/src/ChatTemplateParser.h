// Builds the syntax tree of a chat template with jinja2's grammar and operator
// precedence, and refuses at parse time what the interpreter cannot run:
// unknown or unsupported tags, filters, tests, methods and functions, each
// named with its line. Wherever jinja2 renders a template, ninfer renders the
// same text or fails with an error naming what it does not support.
#pragma once

#include "ChatTemplateAst.h"

#include <string_view>

namespace ninfer {
namespace jinja {

// Throws TemplateError (with the line) on a syntax error or unsupported construct.
Template parseTemplate(std::string_view source);

// What the interpreter implements (ChatTemplateInterpreter.cpp); the parser checks names against
// these.
bool hasFilter(std::string_view name);
bool hasTest(std::string_view name);
bool hasMethod(std::string_view name);

} // namespace jinja
} // namespace ninfer
