// Chat templates: the Jinja program a checkpoint ships (tokenizer_config.json's
// `chat_template`) that turns a conversation into the prompt text the model was
// trained on. The runtime carries a small Jinja interpreter for the subset real
// templates use, with the semantics of jinja2 under transformers'
// apply_chat_template (trim_blocks, lstrip_blocks, loop controls, the
// raise_exception / strftime_now / namespace globals, its tojson filter), so
// the rendered prompt is byte-identical to the reference.
//
// Anything the interpreter does not implement is refused when the template is
// parsed, with the construct and its line named, so `ninferc` can reject a
// template at compile time instead of producing a wrong prompt.
//
// Known gaps (each an error, never a different prompt, except where noted):
// printf-style `%` formatting, str.format, `{% call %}`, `{% filter %}`,
// `{% include %}`/`{% extends %}`, recursive loops, `*args`/`**kwargs` in
// calls, and dict keys other than strings are refused. Differences that render:
// upper/lower/title/capitalize map only ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic letters (Python maps all of Unicode); `escape` returns a plain string (no
// Markup auto-escaping afterwards); Python methods accept keyword arguments
// that CPython would refuse.
#pragma once

#include "ninfer/Status.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role; // "system", "user", "assistant", ...
  std::string content;
};

struct ChatRenderOptions {
  // Append the header that starts the assistant's turn.
  bool addGenerationPrompt = true;
  // The tokenizer's special-token texts as the template sees them
  // (`bos_token`, `eos_token`); nullopt leaves the variable undefined, as
  // transformers does for a tokenizer without that token.
  std::optional<std::string> bosToken;
  std::optional<std::string> eosToken;
  // More template variables as a JSON object, e.g.
  // {"tools": [...], "date_string": "26 Jul 2024", "enable_thinking": false}.
  // `tools` and `documents` are none unless given here. Empty: no extras.
  std::string extraVariablesJson;
};

class ChatTemplate {
public:
  // Errors name the line and the construct: "line 3: unknown filter 'wordwrap'".
  static Result<ChatTemplate> parse(std::string_view source);

  Result<std::string> render(const std::vector<ChatMessage>& messages,
                             const ChatRenderOptions& options) const;
  // Messages as a JSON array of objects, for tool calls and structured content.
  Result<std::string> renderJson(std::string_view messagesJson,
                                 const ChatRenderOptions& options) const;

private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Template> tmpl) : tmpl_(std::move(tmpl)) {}
  std::shared_ptr<const jinja::Template> tmpl_; // immutable; copies share it
};

// Texts that end a turn in the chat formats we know: <|im_end|> (ChatML),
// <|eot_id|> and <|eom_id|> (Llama 3), <end_of_turn> (Gemma), <|end|> (Phi-3),
// ... A vocabulary token with one of these texts that the template itself
// writes is an end-of-turn token: chat generation stops there. The compiler
// adds such ids to the plan's eos_ids; the chat command applies the same rule
// to plans made before it did.
const std::vector<std::string>& chatEndOfTurnMarkers();

} // namespace ninfer
