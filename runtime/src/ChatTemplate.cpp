// The public chat-template API: parse once, render per conversation. Engine
// errors (TemplateError, out of memory) stop here and become a Status.
#include "ninfer/ChatTemplate.h"

#include "ChatTemplateInterpreter.h"
#include "ChatTemplateParser.h"
#include "Utf8.h"

#include <new>

namespace ninfer {
namespace {

std::string describe(const jinja::TemplateError& error, const char* stage) {
  const std::string where = error.line > 0 ? " at line " + std::to_string(error.line) : "";
  if (error.raisedByTemplate)
    return "chat template raised an error" + where + ": " + error.message;
  return std::string("chat template ") + stage + " error" + where + ": " + error.message;
}

Status checkUtf8(std::string_view text, const char* what) {
  const size_t bad = utf8::findInvalid(text);
  if (bad != std::string_view::npos)
    return Status::error(std::string(what) + " is not valid UTF-8 (byte " + std::to_string(bad) +
                         ")");
  return Status::ok();
}

Result<std::string> renderWith(const jinja::Template& tmpl, jinja::Value messages,
                               const ChatRenderOptions& options) {
  try {
    jinja::Dict variables;
    variables.set("messages", std::move(messages));
    variables.set("tools", jinja::Value::none());
    variables.set("documents", jinja::Value::none());
    variables.set("add_generation_prompt", jinja::Value::boolean(options.addGenerationPrompt));
    if (options.bosToken) {
      NINFER_RETURN_IF_ERROR(checkUtf8(*options.bosToken, "bos_token"));
      variables.set("bos_token", jinja::Value::string(*options.bosToken));
    }
    if (options.eosToken) {
      NINFER_RETURN_IF_ERROR(checkUtf8(*options.eosToken, "eos_token"));
      variables.set("eos_token", jinja::Value::string(*options.eosToken));
    }
    if (!options.extraVariablesJson.empty()) {
      const jinja::Value extra = jinja::parseJson(options.extraVariablesJson);
      if (!extra.isDict())
        return Status::error("chat template extra variables must be a JSON object");
      for (const auto& [key, value] : extra.asDict().entries)
        variables.set(key, value);
    }
    return jinja::render(tmpl, variables);
  } catch (const jinja::TemplateError& error) {
    return Status::error(describe(error, "render"));
  } catch (const std::bad_alloc&) {
    return Status::error("chat template render error: out of memory");
  }
}

} // namespace

const std::vector<std::string>& chatEndOfTurnMarkers() {
  static const std::vector<std::string> markers = {
      "<|im_end|>",            // ChatML (Qwen, SmolLM, many fine-tunes)
      "<|eot_id|>",            // Llama 3
      "<|eom_id|>",            // Llama 3.1: end of message, a tool call is pending
      "<end_of_turn>",         // Gemma
      "<|end|>",               // Phi-3
      "<|END_OF_TURN_TOKEN|>", // Command-R
      "<|end▁of▁sentence|>",   // DeepSeek
      "<|return|>",            // gpt-oss
      "<|endoftext|>",         // templates that close turns with the base model's EOS
      "<|end_of_text|>",
  };
  return markers;
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  NINFER_RETURN_IF_ERROR(checkUtf8(source, "chat template"));
  try {
    auto tmpl = std::make_shared<jinja::Template>(jinja::parseTemplate(source));
    return ChatTemplate(std::move(tmpl));
  } catch (const jinja::TemplateError& error) {
    return Status::error(describe(error, "syntax"));
  } catch (const std::bad_alloc&) {
    return Status::error("chat template syntax error: out of memory");
  }
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                         const ChatRenderOptions& options) const {
  jinja::List list;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string what = "message " + std::to_string(i);
    NINFER_RETURN_IF_ERROR(checkUtf8(messages[i].role, (what + " role").c_str()));
    NINFER_RETURN_IF_ERROR(checkUtf8(messages[i].content, (what + " content").c_str()));
    jinja::Dict message;
    message.set("role", jinja::Value::string(messages[i].role));
    message.set("content", jinja::Value::string(messages[i].content));
    list.push_back(jinja::Value::dict(std::move(message)));
  }
  return renderWith(*tmpl_, jinja::Value::list(std::move(list)), options);
}

Result<std::string> ChatTemplate::renderJson(std::string_view messagesJson,
                                             const ChatRenderOptions& options) const {
  jinja::Value messages;
  try {
    messages = jinja::parseJson(messagesJson);
  } catch (const jinja::TemplateError& error) {
    return Status::error("chat messages: " + error.message);
  }
  if (!messages.isList())
    return Status::error("chat messages must be a JSON array");
  return renderWith(*tmpl_, std::move(messages), options);
}

} // namespace ninfer
