// Splits a Jinja template into text and tag tokens the way jinja2's lexer does
// with the options transformers uses for chat templates (trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False): the whitespace a template
// keeps or drops around its tags decides the exact bytes of the prompt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {
namespace jinja {

enum class TokenType : uint8_t {
  Data,          // template text (already whitespace-controlled)
  VariableBegin, // {{
  VariableEnd,   // }}
  BlockBegin,    // {%
  BlockEnd,      // %}
  Name,
  String, // text holds the decoded value
  Integer,
  Float,
  Operator, // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  Eof,
};

struct Token {
  TokenType type;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// Throws TemplateError (with the line) on a lexical error.
std::vector<Token> tokenize(std::string_view source);

} // namespace jinja
} // namespace ninfer
