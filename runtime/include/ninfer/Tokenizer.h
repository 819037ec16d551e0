// Text <-> token ids from the tokenizer tables the compiler embedded in the plan.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {
namespace plan {
struct Tokenizer;
}

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  // Builds the tokenizer described by the plan; kind None yields an error
  // saying the plan carries no tokenizer (use --prompt-ids).
  static Result<std::unique_ptr<Tokenizer>> fromPlan(const plan::Tokenizer* table);

  // addSpecial: prepend BOS when the tokenizer's rules say so.
  virtual Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecial) const = 0;
  // The bytes of one token (special tokens give their text).
  virtual std::string tokenBytes(int32_t id) const = 0;
  virtual int vocabSize() const = 0;

  // The text of a whole sequence, as the reference tokenizer decodes it: the
  // tokens' bytes joined (ill-formed UTF-8 becomes U+FFFD), and for
  // SentencePiece-style tokenizers without the space that encoding put in front
  // of the text. decode(encode(x, false)) == x for any x the normalizer keeps.
  std::string decode(const std::vector<int32_t>& ids) const;
  // Whether `id`, as the first token of a text, begins with a space that
  // decoding drops (SentencePiece's dummy prefix).
  virtual bool dropsLeadingSpaceAtStart(int32_t id) const { return false; }
};

// Turns a stream of ids into text without ever emitting half a UTF-8 character.
// By default the ids continue a text (generated after a prompt), so every space
// is kept; with startOfText the stream is a whole text and, as in decode(), a
// SentencePiece dummy-prefix space at its start is dropped.
class StreamDecoder {
public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool startOfText = false)
      : tokenizer_(tokenizer), atStart_(startOfText) {}
  // Returns the text that became complete with this id (possibly empty).
  std::string push(int32_t id);
  // Whatever is left (incomplete sequences are replaced by U+FFFD).
  std::string finish();

private:
  const Tokenizer& tokenizer_;
  std::string pending_;
  bool atStart_;
};

} // namespace ninfer
