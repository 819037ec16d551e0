// Reads the checkpoint's chat template (chat_template.jinja, or
// tokenizer_config.json's `chat_template`) and the bos/eos token texts into the
// plan's tokenizer table, after checking that the runtime's interpreter can
// parse it; also adds the template's end-of-turn tokens to eos_ids.
#pragma once

#include "plan_generated.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace ninfer {

// modelDir: the checkpoint folder or its config.json. Call after
// importTokenizer (the end-of-turn rule looks tokens up in table.tokens).
// A checkpoint without a chat template leaves the table as it is.
//
// End-of-turn rule: a token is added to eos_ids when (1) its text is one of
// the known end-of-turn markers (ninfer::chatEndOfTurnMarkers(): <|im_end|>,
// <|eot_id|>, <|eom_id|>, <end_of_turn>, <|end|>, <|END_OF_TURN_TOKEN|>,
// <|end▁of▁sentence|>, <|return|>, <|endoftext|>, <|end_of_text|>), (2) the
// template text contains it, and (3) the vocabulary has it as one token. When the template
// uses `eos_token` (Llama-2/Mistral close the assistant turn with it), the eos
// text's id is added too. Chat generation then stops where the template ends
// an assistant turn, even when generation_config.json lists only the base
// model's EOS.
llvm::Error importChatTemplate(const std::string& modelDir, plan::TokenizerT& table);

// The same for a template from elsewhere (a GGUF file's tokenizer.chat_template):
// `sourceName` names it in errors; bos/eos are the token texts the template sees.
llvm::Error setChatTemplate(const std::string& source, const std::string& sourceName,
                            const std::optional<std::string>& bos,
                            const std::optional<std::string>& eos, plan::TokenizerT& table);

} // namespace ninfer
