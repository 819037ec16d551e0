// The checkpoint's tokenizer -> the plan's tokenizer table. Only what the
// runtime reproduces exactly is accepted; anything else is refused with an
// error naming the unsupported piece, so a plan never encodes text differently
// from the reference tokenizer. Three layouts:
//
//  * tokenizer.json, byte-level BPE: the ByteLevel pre-tokenizer (GPT-2 regex,
//    or a Split with a known regex followed by ByteLevel), the ByteLevel
//    decoder, optionally the NFC normalizer (Qwen2) and ignore_merges (Llama 3).
//  * tokenizer.json, SentencePiece style (Llama 2/Mistral/TinyLlama as
//    converted by transformers): BPE with byte_fallback, "▁" for spaces through
//    the normalizer Sequence[Prepend("▁"), Replace(" ", "▁")] or a Metaspace
//    pre-tokenizer, the decoder Sequence[Replace("▁", " "), ByteFallback, Fuse,
//    Strip(" ", 1, 0)].
//  * tokenizer.model without tokenizer.json: the SentencePiece model itself
//    (SentencePieceModel.cpp), the reference being the sentencepiece library.
#include "TokenizerImport.h"

#include "JsonFile.h"

#include "SentencePieceModel.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
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

std::string typeOf(const json::Object& object) {
  auto type = object.getString("type");
  return type ? type->str() : std::string("(no type)");
}

// Pre-tokenizer regexes the runtime implements by hand, by their plan name.
struct KnownPattern {
  const char* name;
  const char* regex;
};
const KnownPattern kKnownPatterns[] = {
    {"gpt2", R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re"},
    {"llama3",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
    {"qwen2",
     R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
};

// The ByteLevel pre-tokenizer; with use_regex it also applies the GPT-2 regex.
llvm::Error checkByteLevel(const json::Object& byteLevel, bool expectRegex) {
  if (byteLevel.getBoolean("add_prefix_space").value_or(false))
    return fail("tokenizer.json ByteLevel pre-tokenizer with add_prefix_space is not supported "
                "yet");
  bool useRegex = byteLevel.getBoolean("use_regex").value_or(true);
  if (useRegex != expectRegex)
    return fail(expectRegex
                    ? "tokenizer.json ByteLevel pre-tokenizer without use_regex is not supported"
                    : "tokenizer.json ByteLevel pre-tokenizer applies its regex after a Split; "
                      "this combination is not supported");
  return llvm::Error::success();
}

// Returns the plan's pretokenizer name.
llvm::Expected<std::string> importPreTokenizer(const json::Value* value) {
  const json::Object* pre = value ? value->getAsObject() : nullptr;
  if (!pre)
    return fail("tokenizer.json has no pre_tokenizer; byte-level BPE needs ByteLevel");
  std::string type = typeOf(*pre);
  if (type == "ByteLevel") {
    if (auto err = checkByteLevel(*pre, /*expectRegex=*/true))
      return err;
    return std::string("gpt2");
  }
  if (type != "Sequence")
    return fail("tokenizer.json pre_tokenizer '" + type + "' is not supported yet");
  // Llama 3 / Qwen2 style: Split(regex, Isolated) then ByteLevel without regex.
  const json::Array* steps = pre->getArray("pretokenizers");
  if (!steps || steps->size() != 2 || !(*steps)[0].getAsObject() || !(*steps)[1].getAsObject())
    return fail("tokenizer.json pre_tokenizer Sequence is supported only as [Split, ByteLevel]");
  const json::Object& split = *(*steps)[0].getAsObject();
  const json::Object& byteLevel = *(*steps)[1].getAsObject();
  if (typeOf(split) != "Split")
    return fail("tokenizer.json pre_tokenizer '" + typeOf(split) + "' is not supported yet");
  if (typeOf(byteLevel) != "ByteLevel")
    return fail("tokenizer.json pre_tokenizer '" + typeOf(byteLevel) + "' is not supported yet");
  if (auto err = checkByteLevel(byteLevel, /*expectRegex=*/false))
    return err;
  auto behavior = split.getString("behavior");
  if (!behavior || *behavior != "Isolated" || split.getBoolean("invert").value_or(false))
    return fail("tokenizer.json Split pre-tokenizer is supported only with behavior Isolated");
  const json::Object* pattern = split.getObject("pattern");
  std::optional<llvm::StringRef> regex = pattern ? pattern->getString("Regex") : std::nullopt;
  if (!regex)
    return fail("tokenizer.json Split pre-tokenizer is supported only with a Regex pattern");
  for (const KnownPattern& known : kKnownPatterns)
    if (*regex == known.regex)
      return std::string(known.name);
  return fail("tokenizer.json Split pattern '" + *regex + "' is not supported yet");
}

llvm::Error checkModelOptions(const json::Object& model) {
  if (auto dropout = model.getNumber("dropout"); dropout && *dropout != 0.0)
    return fail("tokenizer.json BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto text = model.getString(key);
    if (text && !text->empty())
      return fail(llvm::Twine("tokenizer.json BPE option ") + key + " is not supported yet");
  }
  return llvm::Error::success();
}

constexpr llvm::StringLiteral kSpaceSymbol = "\xE2\x96\x81"; // "▁"

// The steps of a Sequence (normalizers / decoders), or the value itself.
std::vector<const json::Object*> stepsOf(const json::Object& object, llvm::StringRef listKey) {
  std::vector<const json::Object*> steps;
  if (typeOf(object) == "Sequence") {
    if (const json::Array* list = object.getArray(listKey))
      for (const json::Value& step : *list)
        steps.push_back(step.getAsObject());
  } else {
    steps.push_back(&object);
  }
  return steps;
}

// Normalizers of a SentencePiece-style tokenizer.json.
struct SpNormalizer {
  bool nfc = false;
  bool prepend = false;      // Prepend("▁")
  bool replaceSpace = false; // Replace(" ", "▁")
};

// The byte-level layout accepts no normalizer or NFC (Qwen2); the
// SentencePiece layout also Prepend("▁") and Replace(" ", "▁").
llvm::Expected<SpNormalizer> importNormalizer(const json::Value* value, bool sentencePiece) {
  SpNormalizer result;
  if (!value || value->getAsNull())
    return result;
  const json::Object* object = value->getAsObject();
  if (!object)
    return fail("tokenizer.json normalizer is not an object");
  for (const json::Object* step : stepsOf(*object, "normalizers")) {
    std::string type = step ? typeOf(*step) : std::string("?");
    if (type == "NFC") {
      result.nfc = true;
      continue;
    }
    if (sentencePiece && type == "Prepend") {
      auto text = step->getString("prepend");
      if (!text || *text != kSpaceSymbol)
        return fail("tokenizer.json Prepend normalizer is supported only with \"\u2581\"");
      result.prepend = true;
      continue;
    }
    if (sentencePiece && type == "Replace") {
      const json::Object* pattern = step->getObject("pattern");
      auto from = pattern ? pattern->getString("String") : std::nullopt;
      auto to = step->getString("content");
      if (!from || *from != " " || !to || *to != kSpaceSymbol)
        return fail("tokenizer.json Replace normalizer is supported only as \" \" -> \"\u2581\"");
      result.replaceSpace = true;
      continue;
    }
    return fail("tokenizer.json normalizer '" + type + "' is not supported yet");
  }
  return result;
}

// Metaspace as the plan names it ("metaspace-<scheme>[-split]"), or "" for none.
llvm::Expected<std::string> importMetaspace(const json::Value* value) {
  const json::Object* pre = value && !value->getAsNull() ? value->getAsObject() : nullptr;
  if (!pre) {
    if (value && !value->getAsNull())
      return fail("tokenizer.json pre_tokenizer is not an object");
    return std::string();
  }
  std::string type = typeOf(*pre);
  if (type != "Metaspace")
    return fail("tokenizer.json pre_tokenizer '" + type +
                "' is not supported yet with SentencePiece-style BPE");
  auto replacement = pre->getString("replacement");
  if (replacement && *replacement != kSpaceSymbol)
    return fail("tokenizer.json Metaspace pre-tokenizer is supported only with \"\u2581\"");
  std::string scheme;
  if (auto text = pre->getString("prepend_scheme")) {
    scheme = text->str();
    if (scheme != "always" && scheme != "first" && scheme != "never")
      return fail("tokenizer.json Metaspace prepend_scheme '" + scheme + "' is unknown");
  } else {
    // Files from before prepend_scheme: add_prefix_space means "always".
    scheme = pre->getBoolean("add_prefix_space").value_or(true) ? "always" : "never";
  }
  bool split = pre->getBoolean("split").value_or(true);
  return "metaspace-" + scheme + (split ? "-split" : "");
}

// Decoder of the SentencePiece layout; returns whether it strips one leading space.
llvm::Expected<bool> checkSentencePieceDecoder(const json::Object& decoder) {
  bool replace = false, byteFallback = false, fuse = false, strip = false;
  for (const json::Object* step : stepsOf(decoder, "decoders")) {
    std::string type = step ? typeOf(*step) : std::string("?");
    if (type == "Replace") {
      const json::Object* pattern = step->getObject("pattern");
      auto from = pattern ? pattern->getString("String") : std::nullopt;
      auto to = step->getString("content");
      if (!from || *from != kSpaceSymbol || !to || *to != " ")
        return fail("tokenizer.json Replace decoder is supported only as \"\u2581\" -> \" \"");
      replace = true;
    } else if (type == "ByteFallback") {
      byteFallback = true;
    } else if (type == "Fuse") {
      fuse = true;
    } else if (type == "Strip") {
      auto content = step->getString("content");
      if (!content || *content != " " || step->getInteger("start").value_or(0) != 1 ||
          step->getInteger("stop").value_or(0) != 0 || !fuse)
        return fail("tokenizer.json Strip decoder is supported only as Strip(\" \", 1, 0) after "
                    "Fuse");
      strip = true;
    } else {
      return fail("tokenizer.json decoder '" + type +
                  "' is not supported yet with SentencePiece-style BPE");
    }
  }
  if (!replace || !byteFallback)
    return fail("tokenizer.json SentencePiece-style decoder needs Replace(\"\u2581\", \" \") and "
                "ByteFallback");
  return strip;
}

// A decoder of the SentencePiece layout (as opposed to ByteLevel).
bool isSentencePieceDecoder(const json::Object& decoder) {
  for (const json::Object* step : stepsOf(decoder, "decoders")) {
    std::string type = step ? typeOf(*step) : std::string();
    if (type == "ByteFallback" || type == "Replace" || type == "Metaspace")
      return true;
  }
  return false;
}

struct Vocabulary {
  std::vector<std::optional<std::string>> byId;
  llvm::StringMap<int> idOf; // the BPE model's vocabulary only
};

llvm::Error setToken(Vocabulary& vocab, int64_t id, llvm::StringRef text) {
  if (id < 0 || id > INT32_MAX - 1)
    return fail("tokenizer.json token '" + text + "' has id " + llvm::Twine(id) + ", out of range");
  if (static_cast<size_t>(id) >= vocab.byId.size())
    vocab.byId.resize(id + 1);
  auto& slot = vocab.byId[id];
  if (slot && *slot != text)
    return fail("tokenizer.json gives id " + llvm::Twine(id) + " to both '" + *slot + "' and '" +
                text + "'");
  slot = text.str();
  return llvm::Error::success();
}

llvm::Error importVocab(const json::Object& model, Vocabulary& vocab) {
  const json::Object* entries = model.getObject("vocab");
  if (!entries)
    return fail("tokenizer.json model has no vocab");
  for (const auto& [key, value] : *entries) {
    auto id = value.getAsInteger();
    if (!id)
      return fail("tokenizer.json vocab entry '" + key.str() + "' has no integer id");
    if (auto err = setToken(vocab, *id, key.str()))
      return err;
    vocab.idOf[key.str()] = static_cast<int>(*id);
  }
  return llvm::Error::success();
}

llvm::Error importMerges(const json::Object& model, const Vocabulary& vocab,
                         std::vector<uint32_t>& merges) {
  const json::Array* list = model.getArray("merges");
  if (!list)
    return fail("tokenizer.json BPE model has no merges");
  merges.reserve(list->size() * 2);
  for (size_t i = 0; i < list->size(); ++i) {
    const json::Value& entry = (*list)[i];
    llvm::StringRef left, right;
    // Older files write "a b"; newer ones [a, b] (tokens may then hold spaces).
    if (auto text = entry.getAsString()) {
      std::tie(left, right) = text->split(' ');
      if (right.empty() || right.contains(' '))
        return fail("tokenizer.json merge " + llvm::Twine(i) + " '" + *text +
                    "' is not two tokens");
    } else if (const json::Array* pair = entry.getAsArray();
               pair && pair->size() == 2 && (*pair)[0].getAsString() && (*pair)[1].getAsString()) {
      left = *(*pair)[0].getAsString();
      right = *(*pair)[1].getAsString();
    } else {
      return fail("tokenizer.json merge " + llvm::Twine(i) + " is neither \"a b\" nor [a, b]");
    }
    for (llvm::StringRef part : {left, right}) {
      if (!vocab.idOf.count(part))
        return fail("tokenizer.json merge " + llvm::Twine(i) + " uses '" + part +
                    "', which is not in the vocabulary");
    }
    if (!vocab.idOf.count((left + right).str()))
      return fail("tokenizer.json merge " + llvm::Twine(i) + " makes '" + left + right +
                  "', which is not in the vocabulary");
    merges.push_back(vocab.idOf.lookup(left));
    merges.push_back(vocab.idOf.lookup(right));
  }
  return llvm::Error::success();
}

llvm::Error importAddedTokens(const json::Object& root, Vocabulary& vocab,
                              std::vector<uint32_t>& specialIds, bool hasNormalizer) {
  const json::Array* added = root.getArray("added_tokens");
  if (!added)
    return llvm::Error::success();
  for (const json::Value& value : *added) {
    const json::Object* token = value.getAsObject();
    auto id = token ? token->getInteger("id") : std::nullopt;
    auto content = token ? token->getString("content") : std::nullopt;
    if (!id || !content)
      return fail("tokenizer.json has an added token without id or content");
    for (const char* option : {"lstrip", "rstrip", "single_word"})
      if (token->getBoolean(option).value_or(false))
        return fail("tokenizer.json added token '" + *content + "' uses " + option +
                    ", which is not supported yet");
    // Such tokens are matched in the normalized text; the runtime matches all
    // added tokens in the raw text, which is the same only without a normalizer.
    if (hasNormalizer && token->getBoolean("normalized").value_or(false))
      return fail("tokenizer.json added token '" + *content +
                  "' is matched after normalization (normalized: true); not supported yet");
    if (auto err = setToken(vocab, *id, *content))
      return err;
    specialIds.push_back(static_cast<uint32_t>(*id));
  }
  std::sort(specialIds.begin(), specialIds.end());
  specialIds.erase(std::unique(specialIds.begin(), specialIds.end()), specialIds.end());
  return llvm::Error::success();
}

// BOS from the post-processor: TemplateProcessing whose single-sequence
// template starts with a special token. Returns the id, or -1 when none.
llvm::Expected<int> importPostProcessor(const json::Value* value) {
  const json::Object* post = value ? value->getAsObject() : nullptr;
  if (!post)
    return -1;
  std::string type = typeOf(*post);
  if (type == "ByteLevel") // only adjusts offsets
    return -1;
  if (type == "Sequence") {
    int bos = -1;
    if (const json::Array* steps = post->getArray("processors"))
      for (const json::Value& step : *steps) {
        auto stepBos = importPostProcessor(&step);
        if (!stepBos)
          return stepBos.takeError();
        if (*stepBos >= 0)
          bos = *stepBos;
      }
    return bos;
  }
  if (type != "TemplateProcessing")
    return fail("tokenizer.json post_processor '" + type + "' is not supported yet");
  const json::Array* single = post->getArray("single");
  if (!single)
    return fail("tokenizer.json TemplateProcessing has no 'single' template");
  int bos = -1;
  bool seenSequence = false;
  for (const json::Value& piece : *single) {
    const json::Object* item = piece.getAsObject();
    if (item && item->getObject("Sequence")) {
      seenSequence = true;
      continue;
    }
    const json::Object* special = item ? item->getObject("SpecialToken") : nullptr;
    auto name = special ? special->getString("id") : std::nullopt;
    if (!name)
      return fail("tokenizer.json TemplateProcessing has an item that is neither Sequence nor "
                  "SpecialToken");
    if (seenSequence || bos >= 0)
      return fail("tokenizer.json TemplateProcessing adds '" + *name +
                  "' other than as one leading BOS; that is not supported yet");
    const json::Object* tokens = post->getObject("special_tokens");
    const json::Object* entry = tokens ? tokens->getObject(*name) : nullptr;
    const json::Array* ids = entry ? entry->getArray("ids") : nullptr;
    if (!ids || ids->size() != 1 || !(*ids)[0].getAsInteger())
      return fail("tokenizer.json TemplateProcessing special token '" + *name +
                  "' must map to exactly one id");
    bos = static_cast<int>(*(*ids)[0].getAsInteger());
  }
  return bos;
}

// add_eos_token would append EOS to every prompt; the plan cannot say so.
llvm::Error checkNoEos(const json::Object* tokConfig) {
  if (tokConfig && tokConfig->getBoolean("add_eos_token").value_or(false))
    return fail("tokenizer_config.json add_eos_token is not supported yet");
  return llvm::Error::success();
}

llvm::Error importSentencePieceFile(const std::string& path, const ModelConfig& config,
                                    const json::Object* tokConfig, plan::TokenizerT& table) {
  auto model = readSentencePieceModel(path);
  if (!model)
    return model.takeError();
  auto converted = sentencePieceTokenizer(*model);
  if (!converted)
    return converted.takeError();
  plan::TokenizerT& sp = **converted;
  if (config.vocabSize > 0 && sp.tokens.size() > static_cast<size_t>(config.vocabSize))
    return fail("tokenizer.model has " + llvm::Twine(sp.tokens.size()) +
                " pieces but the model's vocab_size is " + llvm::Twine(config.vocabSize));
  // config.json / generation_config.json win where they say something.
  if (config.bosId >= 0)
    sp.bos_id = config.bosId;
  if (!config.eosIds.empty())
    sp.eos_ids = config.eosIds;
  if (sp.bos_id >= 0 && static_cast<size_t>(sp.bos_id) >= sp.tokens.size())
    return fail("BOS id " + llvm::Twine(sp.bos_id) + " is not a piece of tokenizer.model");
  // transformers' LlamaTokenizer adds BOS unless tokenizer_config.json says not to.
  std::optional<bool> addBos = tokConfig ? tokConfig->getBoolean("add_bos_token") : std::nullopt;
  sp.add_bos = addBos.value_or(true) && sp.bos_id >= 0;
  if (addBos.value_or(false) && sp.bos_id < 0)
    return fail("tokenizer_config.json asks for a BOS token but none is defined");
  if (auto err = checkNoEos(tokConfig))
    return err;
  table = std::move(sp);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<plan::TokenizerT>> importTokenizer(const std::string& modelDir,
                                                                  const ModelConfig& config) {
  std::string dir = modelDir;
  if (!llvm::sys::fs::is_directory(dir)) // a config.json path
    dir = llvm::sys::path::parent_path(modelDir).str();
  if (!llvm::sys::fs::is_directory(dir))
    return fail("no model folder at " + modelDir);
  auto pathOf = [&](const char* name) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };

  auto table = std::make_unique<plan::TokenizerT>();
  table->kind = plan::TokenizerKind::None;
  table->bos_id = config.bosId;
  table->eos_ids = config.eosIds;

  std::optional<json::Value> tokenizerConfig;
  if (llvm::sys::fs::exists(pathOf("tokenizer_config.json"))) {
    auto value = readJsonFile(pathOf("tokenizer_config.json"));
    if (!value)
      return value.takeError();
    tokenizerConfig = std::move(*value);
  }
  const json::Object* tokConfig = tokenizerConfig ? tokenizerConfig->getAsObject() : nullptr;
  std::optional<bool> configAddBos;
  if (tokConfig)
    configAddBos = tokConfig->getBoolean("add_bos_token");

  if (!llvm::sys::fs::exists(pathOf("tokenizer.json"))) {
    if (llvm::sys::fs::exists(pathOf("tokenizer.model"))) {
      if (auto err = importSentencePieceFile(pathOf("tokenizer.model"), config, tokConfig, *table))
        return err;
      return table;
    }
    table->add_bos = configAddBos.value_or(false) && table->bos_id >= 0;
    return table;
  }

  auto parsed = readJsonFile(pathOf("tokenizer.json"));
  if (!parsed)
    return parsed.takeError();
  const json::Object* root = parsed->getAsObject();
  if (!root)
    return fail("tokenizer.json is not a JSON object");
  const json::Object* model = root->getObject("model");
  if (!model)
    return fail("tokenizer.json has no model");
  std::string modelType = typeOf(*model);
  if (modelType != "BPE")
    return fail("tokenizer.json model '" + modelType + "' is not supported yet");
  if (auto err = checkModelOptions(*model))
    return err;

  const json::Object* decoder = root->getObject("decoder");
  if (!decoder)
    return fail("tokenizer.json has no decoder; BPE needs the ByteLevel or the SentencePiece-style "
                "decoder");
  const bool sentencePiece = isSentencePieceDecoder(*decoder);
  const bool byteFallback = model->getBoolean("byte_fallback").value_or(false);
  auto normalizer = importNormalizer(root->get("normalizer"), sentencePiece);
  if (!normalizer)
    return normalizer.takeError();
  const bool hasNormalizer = normalizer->nfc || normalizer->prepend || normalizer->replaceSpace;

  std::string preTokenizerName;
  if (sentencePiece) {
    if (!byteFallback)
      return fail("tokenizer.json SentencePiece-style BPE without byte_fallback is not supported "
                  "yet");
    auto metaspace = importMetaspace(root->get("pre_tokenizer"));
    if (!metaspace)
      return metaspace.takeError();
    preTokenizerName = *metaspace;
    auto strips = checkSentencePieceDecoder(*decoder);
    if (!strips)
      return strips.takeError();
    if (!normalizer->replaceSpace && preTokenizerName.empty())
      return fail("tokenizer.json SentencePiece-style BPE must turn spaces into \"\u2581\" "
                  "(Replace normalizer or Metaspace pre-tokenizer)");
    bool prepends = normalizer->prepend ||
                    (!preTokenizerName.empty() &&
                     llvm::StringRef(preTokenizerName).find("-never") == llvm::StringRef::npos);
    if (*strips != prepends)
      return fail(prepends ? "tokenizer.json decoder does not strip the \"\u2581\" the encoder "
                             "prepends; not supported"
                           : "tokenizer.json decoder strips a leading space the encoder never "
                             "adds; not supported");
  } else {
    if (typeOf(*decoder) != "ByteLevel")
      return fail("tokenizer.json decoder '" + typeOf(*decoder) + "' is not supported yet");
    if (byteFallback)
      return fail("tokenizer.json BPE with byte_fallback needs the SentencePiece-style decoder "
                  "(Replace, ByteFallback, Fuse), not ByteLevel");
    auto preTokenizer = importPreTokenizer(root->get("pre_tokenizer"));
    if (!preTokenizer)
      return preTokenizer.takeError();
    preTokenizerName = *preTokenizer;
  }

  Vocabulary vocab;
  if (auto err = importVocab(*model, vocab))
    return err;
  if (auto err = importAddedTokens(*root, vocab, table->special_ids, hasNormalizer))
    return err;
  for (size_t id = 0; id < vocab.byId.size(); ++id) {
    if (!vocab.byId[id])
      return fail("tokenizer.json has no token with id " + llvm::Twine(id) +
                  " (ids must be dense)");
    table->tokens.push_back(*vocab.byId[id]);
  }
  if (auto err = importMerges(*model, vocab, table->merges))
    return err;
  if (config.vocabSize > 0 && table->tokens.size() > static_cast<size_t>(config.vocabSize))
    return fail("tokenizer.json has " + llvm::Twine(table->tokens.size()) +
                " tokens but the model's vocab_size is " + llvm::Twine(config.vocabSize));

  if (sentencePiece) {
    for (unsigned b = 0; b < 256; ++b) {
      char name[8];
      snprintf(name, sizeof(name), "<0x%02X>", b);
      if (!vocab.idOf.count(name))
        return fail(llvm::Twine("tokenizer.json has byte_fallback but no token ") + name);
    }
    if (auto unk = model->getString("unk_token")) {
      if (!vocab.idOf.count(*unk))
        return fail("tokenizer.json unk_token '" + *unk + "' is not in the vocabulary");
      table->unk_id = vocab.idOf.lookup(*unk);
    }
  }

  auto templateBos = importPostProcessor(root->get("post_processor"));
  if (!templateBos)
    return templateBos.takeError();
  if (*templateBos >= 0) {
    if (static_cast<size_t>(*templateBos) >= table->tokens.size())
      return fail("tokenizer.json post_processor BOS id " + llvm::Twine(*templateBos) +
                  " is not a token");
    table->bos_id = *templateBos;
  } else if (auto text = tokConfig ? specialTokenText(*tokConfig, "bos_token") : std::nullopt) {
    for (size_t id = 0; id < table->tokens.size(); ++id)
      if (table->tokens[id] == *text)
        table->bos_id = static_cast<int>(id);
  }
  // transformers lets tokenizer_config.json's add_bos_token override the template.
  table->add_bos = configAddBos.value_or(*templateBos >= 0);
  if (table->add_bos && table->bos_id < 0)
    return fail("tokenizer_config.json asks for a BOS token but none is defined");
  if (auto err = checkNoEos(tokConfig))
    return err;

  table->kind =
      sentencePiece ? plan::TokenizerKind::SentencePieceBpe : plan::TokenizerKind::ByteLevelBpe;
  table->pretokenizer = preTokenizerName;
  table->normalizer = normalizer->nfc ? "nfc" : "";
  table->ignore_merges = model->getBoolean("ignore_merges").value_or(false);
  if (sentencePiece) {
    table->byte_fallback = true;
    table->add_dummy_prefix = normalizer->prepend;
  }
  return table;
}

} // namespace ninfer
