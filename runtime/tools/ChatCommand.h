// `ninfer chat` (an interactive conversation with the plan's chat template),
// `ninfer tokenize`, and the one-shot chat prompt used by `ninfer PLAN --chat`.
// The commands print their own `ninfer: error: ...` line and return the exit
// code (0 ok, 1 failure, 2 bad usage); they never throw.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ninfer {

class PlanFile;
class Tokenizer;

// ninfer chat PLAN [--system TEXT] [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]
//                  [--device cpu|cuda|auto] [--threads N]
// argv[1] is "chat". Reads one user turn per line from stdin; /reset clears
// the history, /exit (or end of input) quits; Ctrl-C stops the current answer,
// a second Ctrl-C at the prompt exits.
int runChatCommand(int argc, char** argv);

// ninfer tokenize PLAN TEXT [--no-bos] [--pieces]   (TEXT "-" reads stdin)
// Prints the ids comma-separated, or with --pieces one "id<TAB>piece" per line
// (the piece's bytes with \n, \t, \\, non-printable bytes escaped).
int runTokenizeCommand(int argc, char** argv);

// The plan's chat template rendered for one turn: an optional system message
// (empty: none) and the user's text, with the generation prompt appended.
// Fails when the plan has no chat template.
Result<std::string> renderChatPrompt(const PlanFile& plan, const std::string& system,
                                     const std::string& user);

// Token ids of a rendered chat prompt. The template normally writes BOS
// itself, so the tokenizer adds BOS only when the text does not start with the
// plan's bos_text; a doubled BOS at the start is reduced to one.
Result<std::vector<int32_t>> encodeChatPrompt(const PlanFile& plan, const Tokenizer& tokenizer,
                                              const std::string& prompt);

// Ids generation stops at in a chat: the plan's eos_ids plus the end-of-turn
// tokens its template writes (chatEndOfTurnMarkers), for plans compiled before
// ninferc added those to eos_ids.
std::vector<int32_t> chatStopIds(const PlanFile& plan);

// The same commands with explicit streams (tests). `interactive` shows the
// "> " prompt on `err`; Ctrl-C handling is installed only when it is true.
struct ChatStreams {
  std::FILE* in;
  std::FILE* out;
  std::FILE* err;
  bool interactive;
};
int runChatCommand(int argc, char** argv, const ChatStreams& streams);
int runTokenizeCommand(int argc, char** argv, std::FILE* out, std::FILE* err);

} // namespace ninfer
