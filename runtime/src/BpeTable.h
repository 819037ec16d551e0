// What both BPE tokenizers (ByteLevelBpe, SentencePieceBpe) read from a plan's tokenizer
// table in the same way and refuse with the same errors: the vocabulary's size, the special
// ids, the merges and the BOS token; and the check of a prompt's UTF-8.
#pragma once

#include "ninfer/Status.h"
#include "plan_generated.h"

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ninfer {
namespace bpe {

// The BOS token and whether encode(..., addSpecial = true) puts it first.
struct BosToken {
  int32_t id = -1;
  bool add = false;
};

// The vocabulary's size (at least one token, at most what an int32 id can name), whether each
// id is special (an added token, matched before normalization and pre-tokenization) and the
// BOS token; an error names the first special id out of range, or a BOS to add that is not a
// token.
struct TableBasics {
  size_t vocab = 0;
  std::vector<bool> isSpecial;
  BosToken bos;
};
Result<TableBasics> tableBasics(const plan::Tokenizer& table);

// A merge of the table: the ids of its two sides and of the token their texts make together.
struct MergeRule {
  int32_t left = 0, right = 0, result = 0;
};

// The table's merges in order. Every side must be a token and every joined text
// a token of idOfText (text -> id); an error names the first merge that is not.
Result<std::vector<MergeRule>>
mergeRules(const plan::Tokenizer& table,
           const std::unordered_map<std::string_view, int32_t>& idOfText);

// An error naming the byte offset where the prompt stops being valid UTF-8.
Status checkPrompt(std::string_view text);

} // namespace bpe
} // namespace ninfer
