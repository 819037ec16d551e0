// Tokenizer::fromPlan (the factory over TokenizerKind) and StreamDecoder. A new
// tokenizer kind is a new class next to ByteLevelBpe plus one case here.
#include "ninfer/Tokenizer.h"

#include "ByteLevelBpe.h"
#include "SentencePieceBpe.h"
#include "Utf8.h"
#include "plan_generated.h"

namespace ninfer {

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromPlan(const plan::Tokenizer* table) {
  const char* noTokenizer = "the plan carries no tokenizer (use --prompt-ids)";
  if (!table)
    return Status::error(noTokenizer);
  switch (table->kind()) {
  case plan::TokenizerKind::None:
    return Status::error(noTokenizer);
  case plan::TokenizerKind::ByteLevelBpe:
    return ByteLevelBpe::create(*table);
  case plan::TokenizerKind::SentencePieceBpe:
    return SentencePieceBpe::create(*table);
  }
  return Status::error("the plan's tokenizer kind " +
                       std::to_string(static_cast<int>(table->kind())) +
                       " is not supported by this runtime");
}

namespace {

// Moves the complete characters at the front of `pending` to the result and
// keeps an incomplete tail; ill-formed bytes become U+FFFD (one per maximal
// subpart, as from_utf8_lossy in tokenizers' decode). With `flush`, the tail
// is replaced too.
std::string takeComplete(std::string& pending, bool flush) {
  std::string out;
  const auto* bytes = reinterpret_cast<const unsigned char*>(pending.data());
  size_t size = pending.size();
  size_t pos = 0;
  while (pos < size) {
    if (bytes[pos] < 0x80) {
      out.push_back(pending[pos++]);
      continue;
    }
    utf8::Sequence seq = utf8::checkSequence(bytes + pos, size - pos);
    if (seq.status == utf8::SequenceStatus::Truncated) {
      if (!flush)
        break;
      out.append(utf8::kReplacement);
      pos = size;
      break;
    }
    if (seq.status == utf8::SequenceStatus::Valid)
      out.append(pending, pos, seq.length);
    else
      out.append(utf8::kReplacement);
    pos += seq.length;
  }
  pending.erase(0, pos);
  return out;
}

} // namespace

std::string StreamDecoder::push(int32_t id) {
  std::string bytes = tokenizer_.tokenBytes(id);
  if (atStart_ && !bytes.empty()) {
    // The start of the text ends with the first token that shows something.
    if (bytes[0] == ' ' && tokenizer_.dropsLeadingSpaceAtStart(id))
      bytes.erase(0, 1);
    atStart_ = false;
  }
  pending_ += bytes;
  return takeComplete(pending_, /*flush=*/false);
}

std::string StreamDecoder::finish() { return takeComplete(pending_, /*flush=*/true); }

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  StreamDecoder decoder(*this, /*startOfText=*/true);
  std::string text;
  for (int32_t id : ids)
    text += decoder.push(id);
  text += decoder.finish();
  return text;
}

} // namespace ninfer
