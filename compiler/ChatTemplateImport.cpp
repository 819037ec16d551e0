// Chat template import: where transformers looks for the template (a separate
// chat_template.jinja wins over tokenizer_config.json's `chat_template`, which
// is a string or a list of {name, template} of which "default" is used), the
// bos/eos texts the template sees, and the end-of-turn ids generation stops at.
// The template is parsed (and test-rendered with one user message) by the
// runtime's own interpreter, so a template the runtime cannot run is refused
// here, at compile time, with the file, line and construct named.
#include "ChatTemplateImport.h"

#include "JsonFile.h"

#include "ninfer/ChatTemplate.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <optional>

namespace ninfer {
namespace {

namespace json = llvm::json;

llvm::Error fail(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Looks a token's text up: added (special) tokens first, then the whole vocabulary.
std::optional<int> tokenId(const plan::TokenizerT& table, const std::string& text) {
  for (uint32_t id : table.special_ids)
    if (id < table.tokens.size() && table.tokens[id] == text)
      return int(id);
  for (size_t id = 0; id < table.tokens.size(); ++id)
    if (table.tokens[id] == text)
      return int(id);
  return std::nullopt;
}

void addEosId(plan::TokenizerT& table, int id) {
  if (std::find(table.eos_ids.begin(), table.eos_ids.end(), id) == table.eos_ids.end())
    table.eos_ids.push_back(id);
}

} // namespace

llvm::Error importChatTemplate(const std::string& modelDir, plan::TokenizerT& table) {
  std::string dir = modelDir;
  if (!llvm::sys::fs::is_directory(dir)) // a config.json path
    dir = llvm::sys::path::parent_path(modelDir).str();
  auto pathOf = [&](const char* name) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };

  std::optional<json::Value> config;
  const std::string configPath = pathOf("tokenizer_config.json");
  if (llvm::sys::fs::exists(configPath)) {
    auto parsed = readJsonFile(configPath);
    if (!parsed)
      return parsed.takeError();
    config = std::move(*parsed);
  }
  const json::Object* tokConfig = config ? config->getAsObject() : nullptr;

  std::string source;
  std::string sourceName;
  const std::string jinjaPath = pathOf("chat_template.jinja");
  if (llvm::sys::fs::exists(jinjaPath)) {
    auto text = readTextFile(jinjaPath);
    if (!text)
      return text.takeError();
    source = std::move(*text);
    sourceName = "chat_template.jinja";
  } else if (const json::Value* value = tokConfig ? tokConfig->get("chat_template") : nullptr) {
    sourceName = "tokenizer_config.json chat_template";
    if (auto text = value->getAsString()) {
      source = text->str();
    } else if (const json::Array* list = value->getAsArray()) {
      std::string names;
      bool found = false;
      for (const json::Value& entry : *list) {
        const json::Object* object = entry.getAsObject();
        auto name = object ? object->getString("name") : std::nullopt;
        auto text = object ? object->getString("template") : std::nullopt;
        if (!name || !text)
          return fail("tokenizer_config.json chat_template list entries need 'name' and "
                      "'template' strings");
        names += (names.empty() ? "'" : ", '") + name->str() + "'";
        if (*name == "default") {
          source = text->str();
          found = true;
        }
      }
      if (!found)
        return fail("tokenizer_config.json has chat templates " + names +
                    " but none named 'default'");
      sourceName = "tokenizer_config.json chat_template 'default'";
    } else if (!value->getAsNull()) {
      return fail("tokenizer_config.json chat_template is neither a string nor a list");
    }
  }
  if (source.empty())
    return llvm::Error::success(); // no chat template: nothing to do

  std::optional<std::string> bos =
      tokConfig ? specialTokenText(*tokConfig, "bos_token") : std::nullopt;
  std::optional<std::string> eos =
      tokConfig ? specialTokenText(*tokConfig, "eos_token") : std::nullopt;
  return setChatTemplate(source, sourceName, bos, eos, table);
}

llvm::Error setChatTemplate(const std::string& source, const std::string& sourceName,
                            const std::optional<std::string>& bos,
                            const std::optional<std::string>& eos, plan::TokenizerT& table) {
  Result<ChatTemplate> parsed = ChatTemplate::parse(source);
  if (!parsed)
    return fail(sourceName + ": " + parsed.status().message());

  // A trial render catches what only shows when the template runs (an error
  // the template raises on purpose, raise_exception, is its own business).
  ChatRenderOptions options;
  options.bosToken = bos;
  options.eosToken = eos;
  Result<std::string> trial = parsed->render({{"user", "Hello"}}, options);
  if (!trial && trial.status().message().rfind("chat template raised", 0) != 0)
    return fail(sourceName + ": " + trial.status().message());

  table.chat_template = source;
  table.bos_text = bos.value_or("");
  table.eos_text = eos.value_or("");

  for (const std::string& marker : chatEndOfTurnMarkers())
    if (source.find(marker) != std::string::npos)
      if (auto id = tokenId(table, marker))
        addEosId(table, *id);
  if (eos && !eos->empty() && source.find("eos_token") != std::string::npos)
    if (auto id = tokenId(table, *eos))
      addEosId(table, *id);
  return llvm::Error::success();
}

} // namespace ninfer
