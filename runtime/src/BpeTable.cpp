#include "BpeTable.h"

#include "Utf8.h"

#include <string>

namespace ninfer {
namespace bpe {

Result<TableBasics> tableBasics(const plan::Tokenizer& table) {
  TableBasics basics;
  const auto* tokens = table.tokens();
  if (!tokens || tokens->size() == 0)
    return Status::error("plan tokenizer has no tokens");
  if (tokens->size() > static_cast<size_t>(INT32_MAX))
    return Status::error("plan tokenizer has too many tokens");
  basics.vocab = tokens->size();
  basics.isSpecial.assign(basics.vocab, false);
  if (const auto* specials = table.special_ids()) {
    for (size_t i = 0; i < specials->size(); ++i) {
      const uint32_t id = specials->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (id >= basics.vocab)
        return Status::error("plan tokenizer special_ids[" + std::to_string(i) +
                             "] = " + std::to_string(id) + " is out of range");
      basics.isSpecial[id] = true;
    }
  }
  basics.bos = {table.bos_id(), table.add_bos()};
  if (basics.bos.add && (basics.bos.id < 0 || static_cast<size_t>(basics.bos.id) >= basics.vocab))
    return Status::error("plan tokenizer adds BOS but bos_id " + std::to_string(basics.bos.id) +
                         " is not a token");
  return basics;
}

Result<std::vector<MergeRule>>
mergeRules(const plan::Tokenizer& table,
           const std::unordered_map<std::string_view, int32_t>& idOfText) {
  std::vector<MergeRule> rules;
  const auto* merges = table.merges();
  if (!merges)
    return rules;
  if (merges->size() % 2 != 0)
    return Status::error("plan tokenizer merges has an odd number of entries");
  const auto* tokens = table.tokens();
  const size_t vocab = tokens ? tokens->size() : 0;
  auto textOf = [&](uint32_t id) {
    const auto* text = tokens->Get(static_cast<flatbuffers::uoffset_t>(id));
    return text ? text->string_view() : std::string_view();
  };
  const size_t count = merges->size() / 2;
  rules.reserve(count);
  std::string joined;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t left = merges->Get(static_cast<flatbuffers::uoffset_t>(2 * i));
    const uint32_t right = merges->Get(static_cast<flatbuffers::uoffset_t>(2 * i + 1));
    if (left >= vocab || right >= vocab)
      return Status::error("plan tokenizer merge " + std::to_string(i) +
                           " refers to a token id out of range");
    joined.assign(textOf(left));
    joined.append(textOf(right));
    auto it = idOfText.find(joined);
    if (it == idOfText.end())
      return Status::error("plan tokenizer merge " + std::to_string(i) + " makes '" + joined +
                           "', which is not in the vocabulary");
    rules.push_back({static_cast<int32_t>(left), static_cast<int32_t>(right), it->second});
  }
  return rules;
}

Status checkPrompt(std::string_view text) {
  const size_t bad = utf8::findInvalid(text);
  if (bad != std::string_view::npos)
    return Status::error("prompt is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  return Status::ok();
}

} // namespace bpe
} // namespace ninfer
