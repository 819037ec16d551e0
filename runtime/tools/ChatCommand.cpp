// `ninfer chat` and `ninfer tokenize`. The chat loop keeps the conversation as
// messages, renders the plan's chat template each turn and re-prefills the
// whole conversation: Generator::generate always starts at position 0, so the
// KV cache is not carried across turns (prefill is the cheap part of a turn
// for conversations that fit the context; carrying it would need a Generator
// that resumes at a position and a prompt whose tokens are a strict extension
// of the previous turn's, which re-tokenizing a rendered template does not
// guarantee).
#include "ChatCommand.h"
#include "SamplingOptions.h"

#include "ninfer/ChatTemplate.h"
#include "ninfer/Executor.h"
#include "ninfer/Generator.h"
#include "ninfer/Plan.h"
#include "ninfer/Sampler.h"
#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <unistd.h>

namespace ninfer {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char* const kChatHelp =
    R"(usage: ninfer chat PLAN [options]

Talk with the model: each line read from stdin is one user turn, rendered with the
chat template the plan carries. Commands: /reset clears the history, /exit quits
(so does the end of input). Ctrl-C stops the current answer; Ctrl-C at the prompt
twice in a row quits.

options:
  --system TEXT         a system message at the start of the conversation
  -n N                  at most N tokens per answer (default 512)
  --temp T              sampling temperature (default 0 = greedy)
  --top-k K             keep the K most likely tokens (default 0 = off)
  --top-p P             nucleus sampling threshold (default 1 = off)
  --seed S              random seed for sampling (default 0)
  --device D            cuda, cpu or auto (default auto)
  --threads N           CPU executor threads (default: all hardware threads)
)";

const char* const kTokenizeHelp =
    R"(usage: ninfer tokenize PLAN TEXT [--no-bos] [--pieces]

Prints the token ids of TEXT ("-" reads it from stdin), comma-separated.
  --no-bos              do not add the beginning-of-sequence token
  --pieces              one "id<TAB>piece" line per token instead
)";

std::atomic<bool> gInterrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler needs a lock-free flag");

extern "C" void onSigint(int) { gInterrupted.store(true); }

// Installs the Ctrl-C handler (without SA_RESTART, so a blocked read returns
// EINTR) and restores the previous one when destroyed.
class InterruptGuard {
public:
  explicit InterruptGuard(bool enable) : enabled_(enable) {
    if (!enabled_)
      return;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = onSigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptGuard() {
    if (enabled_)
      sigaction(SIGINT, &previous_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

private:
  bool enabled_;
  struct sigaction previous_;
};

// Reads lines from a file descriptor; an interrupted read is reported, not retried.
class LineReader {
public:
  explicit LineReader(int fd) : fd_(fd) {}
  enum class Status { Line, End, Interrupted };

  Status next(std::string& line) {
    while (true) {
      const size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        return Status::Line;
      }
      if (end_) {
        if (buffer_.empty())
          return Status::End;
        line.swap(buffer_);
        buffer_.clear();
        return Status::Line;
      }
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) {
        if (gInterrupted.load())
          return Status::Interrupted;
        continue;
      }
      if (n <= 0)
        end_ = true;
      else
        buffer_.append(chunk, size_t(n));
    }
  }

private:
  int fd_;
  std::string buffer_;
  bool end_ = false;
};

// Replaces ill-formed UTF-8 (from a terminal in another encoding) with U+FFFD.
std::string validUtf8(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    bool ok = length > 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k)
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (ok && length > 1) { // reject overlong forms, surrogates, > U+10FFFF
      uint32_t cp = c & (0x7F >> length);
      for (size_t k = 1; k < length; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
      ok = !((length == 2 && cp < 0x80) || (length == 3 && cp < 0x800) ||
             (length == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp < 0xE000));
    }
    if (ok) {
      out.append(text, i, length);
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string flatString(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// ---- argument parsing ----

struct ChatOptions {
  std::string planPath;
  std::string system;
  int maxNewTokens = 512;
  SamplingParams sampling;
  std::string device = "auto";
  int threads = 0;
  bool help = false;
};

// Returns an error message, or "" when the options are fine.
std::string parseChatOptions(int argc, char** argv, ChatOptions& o) {
  int i = argc > 1 && std::string(argv[1]) == "chat" ? 2 : 1;
  auto value = [&](const std::string& option, std::string& out) {
    if (i + 1 >= argc)
      return option + " needs a value";
    out = argv[++i];
    return std::string();
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    std::string text, error;
    long long number = 0;
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--system") {
      if (!(error = value(arg, o.system)).empty())
        return error;
    } else if (arg == "-n") {
      if (!(error = value(arg, text)).empty())
        return error;
      if (!(error = cli::parseIntegerOption(arg, text, 1, 1 << 30, number)).empty())
        return error;
      o.maxNewTokens = int(number);
    } else if (cli::isSamplingOption(arg)) {
      if (!(error = value(arg, text)).empty() ||
          !(error = cli::setSamplingOption(arg, text, o.sampling)).empty())
        return error;
    } else if (arg == "--device") {
      if (!(error = value(arg, o.device)).empty())
        return error;
      if (o.device != "cuda" && o.device != "cpu" && o.device != "auto")
        return "--device expects cuda, cpu or auto, got '" + o.device + "'";
    } else if (arg == "--threads") {
      if (!(error = value(arg, text)).empty())
        return error;
      if (!(error = cli::parseIntegerOption(arg, text, 1, 4096, number)).empty())
        return error;
      o.threads = int(number);
    } else if (!arg.empty() && arg[0] == '-') {
      return "unknown option '" + arg + "' for chat (see ninfer chat --help)";
    } else if (o.planPath.empty()) {
      o.planPath = arg;
    } else {
      return "unexpected argument '" + arg + "' (one plan per chat)";
    }
  }
  if (o.planPath.empty() && !o.help)
    return "chat needs a plan: ninfer chat PLAN [options]";
  return "";
}

bool planHasGpuCode(const plan::Plan& p) {
  const plan::KernelModule* k = p.kernels();
  return k && k->functions() && k->functions()->size() > 0 &&
         ((k->cubins() && k->cubins()->size() > 0) || (k->ptx() && k->ptx()->size() > 0));
}

// As `ninfer PLAN`: cuda when usable, else cpu, and say which on stderr.
Result<std::unique_ptr<Executor>> makeExecutor(const PlanFile& file, const std::string& device,
                                               int threads, std::FILE* err) {
  if (device == "cpu")
    return createCpuExecutor(file, threads);
  if (device == "cuda")
    return createCudaExecutor(file, 0);
  if (!planHasGpuCode(file.plan())) {
    std::fprintf(err, "ninfer: device: cpu (the plan carries no GPU kernels)\n");
    return createCpuExecutor(file, threads);
  }
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(file, 0);
  if (cuda.isOk()) {
    std::fprintf(err, "ninfer: device: cuda\n");
    return cuda;
  }
  std::fprintf(err, "ninfer: device: cpu (cuda unavailable: %s)\n",
               cuda.status().message().c_str());
  return createCpuExecutor(file, threads);
}

// ---- the chat template of a plan ----

Status noChatTemplate(const PlanFile& plan) {
  return Status::error("the plan " + plan.path() +
                       " carries no chat template (its checkpoint has none, or it was compiled "
                       "before ninferc imported them); use `ninfer PLAN -p TEXT` with a "
                       "hand-formatted prompt");
}

Result<ChatTemplate> planChatTemplate(const PlanFile& plan) {
  const plan::Tokenizer* table = plan.plan().tokenizer();
  if (!table || !table->chat_template() || table->chat_template()->size() == 0)
    return noChatTemplate(plan);
  Result<ChatTemplate> tmpl = ChatTemplate::parse(table->chat_template()->string_view());
  if (!tmpl.isOk())
    return Status::error("the plan's " + tmpl.status().message());
  return tmpl;
}

ChatRenderOptions planRenderOptions(const PlanFile& plan) {
  ChatRenderOptions options;
  options.addGenerationPrompt = true;
  if (const plan::Tokenizer* table = plan.plan().tokenizer()) {
    const std::string bos = flatString(table->bos_text());
    const std::string eos = flatString(table->eos_text());
    if (!bos.empty())
      options.bosToken = bos;
    if (!eos.empty())
      options.eosToken = eos;
  }
  return options;
}

// ---- the conversation ----

class ChatSession {
public:
  ChatSession(const PlanFile& plan, const Tokenizer& tokenizer, const ChatTemplate& tmpl,
              Executor& executor, const ChatOptions& options, const ChatStreams& streams)
      : plan_(plan), tokenizer_(tokenizer), tmpl_(tmpl), executor_(executor), options_(options),
        streams_(streams), sampler_(options.sampling), renderOptions_(planRenderOptions(plan)) {
    config_ = GenerationConfig::fromPlan(plan);
    config_.maxNewTokens = options.maxNewTokens;
    config_.eosIds = chatStopIds(plan);
    reset();
  }

  // Checks that the template accepts this conversation's shape (a system
  // message, a user turn) before the first real turn.
  Status probe() {
    std::vector<ChatMessage> messages = history_;
    messages.push_back({"user", "Hello"});
    Result<std::string> text = tmpl_.render(messages, renderOptions_);
    if (text.isOk())
      return Status::ok();
    if (!history_.empty())
      return Status::error("this model's chat template does not accept a system message: " +
                           text.status().message());
    return text.status();
  }

  int run() {
    LineReader reader(fileno(streams_.in));
    bool interruptedAtPrompt = false;
    while (true) {
      if (streams_.interactive) {
        std::fputs("> ", streams_.err);
        std::fflush(streams_.err);
      }
      std::string line;
      const LineReader::Status status = reader.next(line);
      if (status == LineReader::Status::End)
        break;
      if (status == LineReader::Status::Interrupted) {
        gInterrupted.store(false);
        if (interruptedAtPrompt) {
          std::fputc('\n', streams_.err);
          break;
        }
        interruptedAtPrompt = true;
        std::fputs("\n(Ctrl-C again or /exit to quit)\n", streams_.err);
        continue;
      }
      interruptedAtPrompt = false;
      if (line == "/exit" || line == "/quit")
        break;
      if (line == "/reset") {
        reset();
        std::fputs("(conversation cleared)\n", streams_.err);
        continue;
      }
      if (line.find_first_not_of(" \t") == std::string::npos)
        continue;
      Status turn = answer(validUtf8(line));
      if (!turn.isOk()) {
        std::fprintf(streams_.err, "ninfer: error: %s\n", turn.message().c_str());
        if (fatal_)
          return kExitError;
      }
    }
    return 0;
  }

private:
  void reset() {
    history_.clear();
    if (!options_.system.empty())
      history_.push_back({"system", validUtf8(options_.system)});
  }

  // Drops the oldest exchange after the system message (a user turn and the
  // assistant's reply), so that user/assistant alternation is kept.
  bool dropOldestExchange() {
    const size_t first = !history_.empty() && history_[0].role == "system" ? 1 : 0;
    // Keep at least the newest user turn.
    if (history_.size() <= first + 1)
      return false;
    size_t count = 1;
    if (first + 1 < history_.size() - 1 && history_[first + 1].role != "user")
      count = 2;
    history_.erase(history_.begin() + long(first), history_.begin() + long(first + count));
    return true;
  }

  Status answer(const std::string& userText) {
    history_.push_back({"user", userText});
    std::vector<int32_t> prompt;
    const int reserve = std::min(config_.maxNewTokens, std::max(1, config_.context / 4));
    bool dropped = false;
    while (true) {
      Result<std::string> text = tmpl_.render(history_, renderOptions_);
      if (!text.isOk()) {
        history_.pop_back();
        return text.status();
      }
      Result<std::vector<int32_t>> ids = encodeChatPrompt(plan_, tokenizer_, text.value());
      if (!ids.isOk()) {
        history_.pop_back();
        return ids.status();
      }
      prompt = std::move(ids.value());
      if (int64_t(prompt.size()) + reserve <= config_.context)
        break;
      if (!dropOldestExchange()) {
        if (int64_t(prompt.size()) < config_.context)
          break; // the turn alone fits, with less room for the answer
        history_.pop_back();
        return Status::error("this message needs " + std::to_string(prompt.size()) +
                             " tokens with the chat template, more than the plan's context of " +
                             std::to_string(config_.context));
      }
      dropped = true;
    }
    if (dropped)
      std::fputs("(oldest turns dropped to fit the context)\n", streams_.err);

    Generator generator(executor_, config_);
    StreamDecoder decoder(tokenizer_);
    std::string reply;
    bool interrupted = false;
    auto onToken = [&](int32_t id) {
      if (gInterrupted.load()) {
        interrupted = true;
        return false;
      }
      const std::string piece = decoder.push(id);
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), streams_.out);
      std::fflush(streams_.out);
      return true;
    };
    Result<GenerationStats> stats = generator.generate(prompt, sampler_, onToken);
    const std::string rest = decoder.finish();
    reply += rest;
    std::fwrite(rest.data(), 1, rest.size(), streams_.out);
    std::fputc('\n', streams_.out);
    std::fflush(streams_.out);
    gInterrupted.store(false);
    if (!stats.isOk()) {
      history_.pop_back();
      fatal_ = true; // the executor failed: the session cannot go on
      return stats.status();
    }
    if (interrupted)
      std::fputs("(answer stopped)\n", streams_.err);
    else if (stats->stoppedAtContext)
      std::fputs("(answer cut: the context is full; /reset starts over)\n", streams_.err);
    else if (!stats->stoppedAtEos && stats->generatedTokens >= config_.maxNewTokens)
      std::fprintf(streams_.err, "(answer cut at -n %d tokens)\n", config_.maxNewTokens);
    history_.push_back({"assistant", reply});
    return Status::ok();
  }

  const PlanFile& plan_;
  const Tokenizer& tokenizer_;
  const ChatTemplate& tmpl_;
  Executor& executor_;
  const ChatOptions& options_;
  ChatStreams streams_;
  Sampler sampler_;
  ChatRenderOptions renderOptions_;
  GenerationConfig config_;
  std::vector<ChatMessage> history_;
  bool fatal_ = false;
};

int chatMain(int argc, char** argv, const ChatStreams& streams) {
  auto error = [&](const std::string& message, int code) {
    std::fprintf(streams.err, "ninfer: error: %s\n", message.c_str());
    return code;
  };
  ChatOptions options;
  const std::string usage = parseChatOptions(argc, argv, options);
  if (options.help) {
    std::fputs(kChatHelp, streams.out);
    return 0;
  }
  if (!usage.empty())
    return error(usage, kExitUsage);

  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(options.planPath);
  if (!file.isOk())
    return error(file.status().message(), kExitError);
  const PlanFile& plan = *file.value();
  Result<ChatTemplate> tmpl = planChatTemplate(plan);
  if (!tmpl.isOk())
    return error(tmpl.status().message(), kExitError);
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromPlan(plan.plan().tokenizer());
  if (!tokenizer.isOk())
    return error(tokenizer.status().message(), kExitError);
  Result<std::unique_ptr<Executor>> executor =
      makeExecutor(plan, options.device, options.threads, streams.err);
  if (!executor.isOk())
    return error(executor.status().message(), kExitError);

  ChatSession session(plan, *tokenizer.value(), tmpl.value(), *executor.value(), options, streams);
  Status ready = session.probe();
  if (!ready.isOk())
    return error(ready.message(), kExitError);
  InterruptGuard guard(streams.interactive);
  return session.run();
}

std::string escapePiece(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 0x20 || c == 0x7F) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", c);
      out += buffer;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string readAll(std::FILE* in) {
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), in)) > 0)
    text.append(chunk, n);
  return text;
}

int tokenizeMain(int argc, char** argv, std::FILE* out, std::FILE* err) {
  auto error = [&](const std::string& message, int code) {
    std::fprintf(err, "ninfer: error: %s\n", message.c_str());
    return code;
  };
  std::string planPath;
  std::optional<std::string> text;
  bool noBos = false, pieces = false;
  for (int i = argc > 1 && std::string(argv[1]) == "tokenize" ? 2 : 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kTokenizeHelp, out);
      return 0;
    }
    if (arg == "--no-bos")
      noBos = true;
    else if (arg == "--pieces")
      pieces = true;
    else if (arg.size() > 1 && arg[0] == '-')
      return error("unknown option '" + arg + "' for tokenize (see ninfer tokenize --help)",
                   kExitUsage);
    else if (planPath.empty())
      planPath = arg;
    else if (!text)
      text = arg;
    else
      return error("unexpected argument '" + arg + "' (quote the text)", kExitUsage);
  }
  if (planPath.empty() || !text)
    return error("usage: ninfer tokenize PLAN TEXT [--no-bos] [--pieces]", kExitUsage);
  if (*text == "-")
    text = readAll(stdin);

  Result<std::unique_ptr<PlanFile>> file = PlanFile::open(planPath);
  if (!file.isOk())
    return error(file.status().message(), kExitError);
  Result<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::fromPlan(file.value()->plan().tokenizer());
  if (!tokenizer.isOk())
    return error(tokenizer.status().message(), kExitError);
  Result<std::vector<int32_t>> ids = tokenizer.value()->encode(*text, !noBos);
  if (!ids.isOk())
    return error(ids.status().message(), kExitError);
  if (pieces) {
    for (int32_t id : ids.value())
      std::fprintf(out, "%d\t%s\n", id, escapePiece(tokenizer.value()->tokenBytes(id)).c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.value().size(); ++i)
      line += (i ? "," : "") + std::to_string(ids.value()[i]);
    std::fprintf(out, "%s\n", line.c_str());
  }
  return 0;
}

} // namespace

Result<std::string> renderChatPrompt(const PlanFile& plan, const std::string& system,
                                     const std::string& user) {
  Result<ChatTemplate> tmpl = planChatTemplate(plan);
  if (!tmpl.isOk())
    return tmpl.status();
  std::vector<ChatMessage> messages;
  if (!system.empty())
    messages.push_back({"system", system});
  messages.push_back({"user", user});
  return tmpl->render(messages, planRenderOptions(plan));
}

Result<std::vector<int32_t>> encodeChatPrompt(const PlanFile& plan, const Tokenizer& tokenizer,
                                              const std::string& prompt) {
  const plan::Tokenizer* table = plan.plan().tokenizer();
  const std::string bosText = table ? flatString(table->bos_text()) : std::string();
  const bool templateWritesBos =
      !bosText.empty() && prompt.compare(0, bosText.size(), bosText) == 0;
  Result<std::vector<int32_t>> ids = tokenizer.encode(prompt, !templateWritesBos);
  if (!ids.isOk())
    return ids;
  const int bos = table ? table->bos_id() : -1;
  std::vector<int32_t>& v = ids.value();
  while (bos >= 0 && v.size() >= 2 && v[0] == bos && v[1] == bos)
    v.erase(v.begin());
  return ids;
}

std::vector<int32_t> chatStopIds(const PlanFile& plan) {
  std::vector<int32_t> stop = GenerationConfig::fromPlan(plan).eosIds;
  const plan::Tokenizer* table = plan.plan().tokenizer();
  if (!table || !table->chat_template() || !table->tokens())
    return stop;
  const std::string_view source = table->chat_template()->string_view();
  const auto* tokens = table->tokens();
  for (const std::string& marker : chatEndOfTurnMarkers()) {
    if (source.find(marker) == std::string_view::npos)
      continue;
    std::optional<int32_t> id;
    if (table->special_ids())
      for (uint32_t special : *table->special_ids())
        if (special < tokens->size() && tokens->Get(special)->string_view() == marker) {
          id = int32_t(special);
          break;
        }
    for (uint32_t i = 0; !id && i < tokens->size(); ++i)
      if (tokens->Get(i)->string_view() == marker)
        id = int32_t(i);
    if (id && std::find(stop.begin(), stop.end(), *id) == stop.end())
      stop.push_back(*id);
  }
  return stop;
}

int runChatCommand(int argc, char** argv, const ChatStreams& streams) {
  try {
    return chatMain(argc, argv, streams);
  } catch (const std::bad_alloc&) {
    std::fprintf(streams.err, "ninfer: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(streams.err, "ninfer: error: %s\n", e.what());
  }
  return kExitError;
}

int runChatCommand(int argc, char** argv) {
  ChatStreams streams{stdin, stdout, stderr, isatty(STDIN_FILENO) != 0};
  return runChatCommand(argc, argv, streams);
}

int runTokenizeCommand(int argc, char** argv, std::FILE* out, std::FILE* err) {
  try {
    return tokenizeMain(argc, argv, out, err);
  } catch (const std::bad_alloc&) {
    std::fprintf(err, "ninfer: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(err, "ninfer: error: %s\n", e.what());
  }
  return kExitError;
}

int runTokenizeCommand(int argc, char** argv) {
  return runTokenizeCommand(argc, argv, stdout, stderr);
}

} // namespace ninfer
