// SentencePiece model files (tokenizer.model, a serialized ModelProto) read
// without the protobuf library: a small wire-format reader takes the fields the
// tokenizer needs (pieces, trainer_spec, normalizer_spec, denormalizer_spec) and
// skips the rest. Then the model becomes the plan's tokenizer table, or an error
// that names what the runtime could not reproduce exactly.
#pragma once

#include "plan_generated.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace ninfer {

struct SentencePieceModel {
  // Values as in sentencepiece_model.proto (never renumbered there).
  enum class PieceType : int {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6
  };
  enum class ModelType : int { Unigram = 1, Bpe = 2, Word = 3, Char = 4 };

  struct Piece {
    std::string text;
    float score = 0.0f;
    int type = static_cast<int>(PieceType::Normal);
  };
  struct NormalizerSpec {
    bool present = false;
    std::string name;
    size_t precompiledCharsmapBytes = 0;
    bool addDummyPrefix = true; // proto defaults
    bool removeExtraWhitespaces = true;
    bool escapeWhitespaces = true;
    std::string normalizationRuleTsv;
  };

  std::vector<Piece> pieces;
  // trainer_spec, with the proto's defaults.
  int modelType = static_cast<int>(ModelType::Unigram);
  bool byteFallback = false;
  bool treatWhitespaceAsSuffix = false;
  int unkId = 0;
  int bosId = 1;
  int eosId = 2;
  NormalizerSpec normalizer;
  NormalizerSpec denormalizer;
};

// Parses a serialized ModelProto; `name` is used in messages.
llvm::Expected<SentencePieceModel> parseSentencePieceModel(llvm::StringRef bytes,
                                                           llvm::StringRef name);
llvm::Expected<SentencePieceModel> readSentencePieceModel(const std::string& path);

// A BPE model -> a SentencePieceBpe table: tokens, scores, every pair of pieces
// whose concatenation is a piece (the runtime ranks them by the result's score),
// user-defined pieces as special_ids, unk/bos ids, byte_fallback and
// add_dummy_prefix. eos_ids holds the model's EOS; add_bos is left false for
// the caller (tokenizer_config.json decides).
llvm::Expected<std::unique_ptr<plan::TokenizerT>>
sentencePieceTokenizer(const SentencePieceModel& model);

} // namespace ninfer
