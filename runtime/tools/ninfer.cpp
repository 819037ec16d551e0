// The `ninfer` command line: generate text from a plan (CUDA or CPU executor),
// and `ninfer inspect` to show what a plan holds. Arguments are parsed by hand;
// every failure ends in one `ninfer: error: ...` line and a non-zero exit.
#include "BenchCommand.h"
#include "ChatCommand.h"
#include "CliCommon.h"
#include "EvalCommand.h"
#include "SamplingOptions.h"

#include "ninfer/AtomicFile.h"
#include "ninfer/Executor.h"
#include "ninfer/Format.h"
#include "ninfer/Generator.h"
#include "ninfer/Plan.h"
#include "ninfer/Sampler.h"
#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef NINFER_VERSION
#define NINFER_VERSION "0.1.0"
#endif

namespace {

using namespace ninfer;
using namespace ninfer::cli;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char* const kHelp =
    R"(ninfer: run a compiled .nplan model

usage:
  ninfer PLAN [prompt] [options]      generate text (or ids) from a prompt
  ninfer chat PLAN [options]          interactive chat with the plan's chat template
  ninfer tokenize PLAN "text"         print the token ids of a text
  ninfer bench PLAN [options]         prefill/decode speed, latency, bandwidth use (--help)
  ninfer perplexity PLAN --file TEXT  perplexity, 512-token chunks, second halves scored (--help)
  ninfer kld PLAN --ref REF --file T  KL divergence, same-top %, PPL ratio against REF (--help)
  ninfer inspect PLAN [--json]        describe what a plan holds
  ninfer --help | --version

prompt (one of):
  -p, --prompt TEXT     the prompt text ("-p -" reads it from stdin)
  -f, --file FILE       read the prompt text from FILE
  --prompt-ids 1,2,3    the prompt as token ids (plans without a tokenizer need this)

options:
  -n N                  generate at most N tokens (default 128)
  --temp T              sampling temperature (default 0 = greedy). On the GPU each token is
                        picked there, so only its id comes back per step: greedy, and a
                        temperature without --top-k or --top-p
  --top-k K             keep the K most likely tokens (default 0 = off; on the GPU, K up to
                        64 are picked there, so only K pairs come back per step)
  --top-p P             keep the smallest set of tokens with probability >= P (default 1 = off;
                        on the GPU without --top-k, the 64 most likely tokens and the row's
                        mass come back, and where the set reaches past them the GPU draws
                        over the whole row; with plans compiled before that, the logits come)
  --seed S              random seed for sampling (default 0)
  --device D            cuda, cpu or auto (default auto: cuda when a usable GPU and a matching
                        cubin or PTX exist, else cpu; the choice is reported on stderr)
  --threads N           CPU executor threads (default: all hardware threads)
  --print-ids           print the generated ids as one comma-separated line instead of text
  --dump-logits FILE    write the vocab_size f32 little-endian logits of the last prompt
                        position to FILE
  --ignore-eos          keep generating past end-of-sequence tokens
  --no-bos              do not add the beginning-of-sequence token to a text prompt
  --chat                format the prompt as one user turn with the plan's chat template
  --system TEXT         with --chat: the system prompt

Generation stops at an end-of-sequence token (not printed), after N tokens, or at the plan's
context. A summary line (prompt tokens, generated tokens, prefill and decode tok/s, executor) goes
to stderr; it says when the context ended the generation before N tokens.
)";

std::vector<int32_t> parseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    ids.push_back(int32_t(integerOption("--prompt-ids", item, 0, INT32_MAX)));
  if (ids.empty())
    usage("--prompt-ids needs at least one id");
  return ids;
}

std::string readStream(std::istream& in) {
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    failWith("cannot read prompt file " + path + ": " + std::strerror(errno));
  return readStream(in);
}

// ---- generation ----

struct GenerateOptions {
  std::string planPath;
  enum class PromptSource { None, Text, File, Ids } source = PromptSource::None;
  std::string promptArg;
  std::vector<int32_t> promptIds;
  int maxNewTokens = 128;
  SamplingParams sampling;
  std::string device = "auto";
  int threads = 0;
  bool printIds = false;
  std::string dumpLogits;
  bool ignoreEos = false;
  bool noBos = false;
  bool chat = false;
  std::string system;
};

// Splits "--opt=value" and fetches the value of options that take one.
class ArgReader {
public:
  ArgReader(int argc, char** argv, int first) : args_(argv + first, argv + argc) {}
  bool done() const { return index_ >= args_.size(); }
  std::string next() {
    std::string arg = args_[index_++];
    pendingValue_.reset();
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        pendingValue_ = arg.substr(eq + 1);
        arg.resize(eq);
      }
    }
    return arg;
  }
  std::string value(const std::string& option) {
    if (pendingValue_) {
      std::string v = *pendingValue_;
      pendingValue_.reset();
      return v;
    }
    if (done())
      usage(option + " needs a value");
    return args_[index_++];
  }
  void noValue(const std::string& option) {
    if (pendingValue_)
      usage(option + " takes no value");
  }

private:
  std::vector<std::string> args_;
  size_t index_ = 0;
  std::optional<std::string> pendingValue_;
};

GenerateOptions parseGenerate(int argc, char** argv) {
  GenerateOptions o;
  ArgReader args(argc, argv, 1);
  auto setPrompt = [&](GenerateOptions::PromptSource source, const std::string& value) {
    if (o.source != GenerateOptions::PromptSource::None)
      usage("give only one of -p, -f and --prompt-ids");
    o.source = source;
    o.promptArg = value;
  };
  while (!args.done()) {
    const std::string arg = args.next();
    if (arg == "-p" || arg == "--prompt") {
      setPrompt(GenerateOptions::PromptSource::Text, args.value(arg));
    } else if (arg == "-f" || arg == "--file") {
      setPrompt(GenerateOptions::PromptSource::File, args.value(arg));
    } else if (arg == "--prompt-ids") {
      setPrompt(GenerateOptions::PromptSource::Ids, args.value(arg));
      o.promptIds = parseIds(o.promptArg);
    } else if (arg == "-n") {
      o.maxNewTokens = int(integerOption(arg, args.value(arg), 0, 1 << 30));
    } else if (isSamplingOption(arg)) {
      const std::string error = setSamplingOption(arg, args.value(arg), o.sampling);
      if (!error.empty())
        usage(error);
    } else if (arg == "--device") {
      o.device = args.value(arg);
      if (o.device != "cuda" && o.device != "cpu" && o.device != "auto")
        usage("--device expects cuda, cpu or auto, got '" + o.device + "'");
    } else if (arg == "--threads") {
      o.threads = int(integerOption(arg, args.value(arg), 1, 4096));
    } else if (arg == "--print-ids") {
      args.noValue(arg);
      o.printIds = true;
    } else if (arg == "--dump-logits") {
      o.dumpLogits = args.value(arg);
    } else if (arg == "--ignore-eos") {
      args.noValue(arg);
      o.ignoreEos = true;
    } else if (arg == "--no-bos") {
      args.noValue(arg);
      o.noBos = true;
    } else if (arg == "--chat") {
      args.noValue(arg);
      o.chat = true;
    } else if (arg == "--system") {
      o.system = args.value(arg);
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      usage("unknown option '" + arg + "' (see ninfer --help)");
    } else if (o.planPath.empty()) {
      o.planPath = arg;
    } else {
      usage("unexpected argument '" + arg + "' (one plan per run)");
    }
  }
  if (o.planPath.empty())
    usage("no plan given (see ninfer --help)");
  if (o.source == GenerateOptions::PromptSource::None)
    usage("no prompt: give -p TEXT, -f FILE or --prompt-ids IDS");
  return o;
}

bool planHasGpuCode(const plan::Plan& p) {
  const plan::KernelModule* k = p.kernels();
  return k && k->functions() && k->functions()->size() > 0 &&
         ((k->cubins() && k->cubins()->size() > 0) || (k->ptx() && k->ptx()->size() > 0));
}

std::unique_ptr<Executor> makeExecutor(const PlanFile& file, const GenerateOptions& o) {
  if (o.device == "cpu")
    return take(createCpuExecutor(file, o.threads));
  if (o.device == "cuda")
    return take(createCudaExecutor(file, 0));
  if (!planHasGpuCode(file.plan())) {
    std::fprintf(stderr, "ninfer: device: cpu (the plan carries no GPU kernels)\n");
    return take(createCpuExecutor(file, o.threads));
  }
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(file, 0);
  if (cuda.isOk()) {
    std::fprintf(stderr, "ninfer: device: cuda\n");
    return std::move(cuda.value());
  }
  std::fprintf(stderr, "ninfer: device: cpu (cuda unavailable: %s)\n",
               cuda.status().message().c_str());
  return take(createCpuExecutor(file, o.threads));
}

// Little-endian f32 values, written whole or not at all.
void writeLogits(const std::string& path, const std::vector<float>& logits) {
  std::string bytes(logits.size() * 4, '\0');
  for (size_t i = 0; i < logits.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &logits[i], 4);
    for (int b = 0; b < 4; ++b)
      bytes[4 * i + b] = static_cast<char>(bits >> (8 * b));
  }
  const Status written = AtomicFile::writeWhole(path, bytes.data(), bytes.size());
  if (!written.isOk())
    failWith(written.message());
}

std::string joinIds(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i)
    text += (i ? "," : "") + std::to_string(ids[i]);
  return text;
}

int runGenerate(int argc, char** argv) {
  const GenerateOptions o = parseGenerate(argc, argv);
  if (!o.dumpLogits.empty()) {
    const Status writable = AtomicFile::probe(o.dumpLogits);
    if (!writable.isOk())
      failWith(writable.message());
  }
  std::unique_ptr<PlanFile> file = take(PlanFile::open(o.planPath));
  const plan::Plan& p = file->plan();
  const plan::Tokenizer* table = p.tokenizer();
  const bool hasTokenizer = table && table->kind() != plan::TokenizerKind::None;

  std::unique_ptr<Tokenizer> tokenizer;
  if (hasTokenizer)
    tokenizer = take(Tokenizer::fromPlan(table));
  std::vector<int32_t> prompt;
  if (o.source == GenerateOptions::PromptSource::Ids) {
    prompt = o.promptIds;
  } else {
    if (!tokenizer)
      failWith("this plan has no tokenizer: use --prompt-ids");
    const std::string text = o.source == GenerateOptions::PromptSource::File ? readFile(o.promptArg)
                             : o.promptArg == "-"                            ? readStream(std::cin)
                                                                             : o.promptArg;
    if (text.empty())
      failWith("the prompt is empty");
    if (o.chat)
      prompt =
          take(encodeChatPrompt(*file, *tokenizer, take(renderChatPrompt(*file, o.system, text))));
    else
      prompt = take(tokenizer->encode(text, !o.noBos));
  }
  const int vocab = p.model()->vocab_size();
  for (int32_t id : prompt)
    if (id >= vocab)
      failWith("prompt id " + std::to_string(id) + " is outside the vocabulary (" +
               std::to_string(vocab) + ")");

  std::unique_ptr<Executor> executor = makeExecutor(*file, o);
  GenerationConfig config = GenerationConfig::fromPlan(*file);
  if (o.chat)
    config.eosIds = chatStopIds(*file);
  config.maxNewTokens = o.maxNewTokens;
  config.ignoreEos = o.ignoreEos;
  Generator generator(*executor, config);
  Sampler sampler(o.sampling);

  const bool streamText = tokenizer && !o.printIds;
  std::unique_ptr<StreamDecoder> decoder;
  if (streamText)
    decoder = std::make_unique<StreamDecoder>(*tokenizer);
  std::vector<int32_t> generated;
  auto onToken = [&](int32_t id) {
    generated.push_back(id);
    if (decoder) {
      const std::string piece = decoder->push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  GenerationStats stats = take(generator.generate(prompt, sampler, onToken));
  if (decoder) {
    const std::string rest = decoder->finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    if (isatty(STDOUT_FILENO))
      std::fputc('\n', stdout);
  } else {
    std::printf("%s\n", joinIds(generated).c_str());
  }
  std::fflush(stdout);
  if (!o.dumpLogits.empty())
    writeLogits(o.dumpLogits, generator.promptLogits());

  auto rate = [](int tokens, double ms) { return ms > 0 ? tokens * 1000.0 / ms : 0.0; };
  // A generation that -n would have let go on says where it ended.
  const std::string contextEnd = stats.stoppedAtContext && stats.generatedTokens < o.maxNewTokens
                                     ? " (stopped at the plan's context of " +
                                           std::to_string(config.context) +
                                           " positions; ninferc --ctx sets it)"
                                     : "";
  std::fprintf(stderr,
               "ninfer: prompt %d tokens, generated %d tokens%s, prefill %.1f tok/s, decode %.1f "
               "tok/s, executor %s\n",
               stats.promptTokens, stats.generatedTokens, contextEnd.c_str(),
               rate(stats.promptTokens, stats.prefillMs), rate(stats.decodeSteps, stats.decodeMs),
               executor->name().c_str());
  return 0;
}

int run(int argc, char** argv) {
  // Subcommands parse their own arguments (and their own --help).
  if (argc >= 2) {
    const std::string command = argv[1];
    if (command == "chat")
      return runChatCommand(argc, argv);
    if (command == "tokenize")
      return runTokenizeCommand(argc, argv);
    if (command == "bench")
      return runBenchCommand(argc, argv);
    if (command == "perplexity")
      return runPerplexityCommand(argc, argv);
    if (command == "kld")
      return runKldCommand(argc, argv);
    if (command == "inspect")
      return runInspect(argc, argv);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // The values of these options are prompts and paths, never flags.
    if (arg == "-p" || arg == "-f" || arg == "--prompt" || arg == "--file" ||
        arg == "--prompt-ids" || arg == "--dump-logits" || arg == "--system") {
      ++i;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("ninfer %s (plan format version %u)\n", NINFER_VERSION, kFormatVersion);
      return 0;
    }
  }
  if (argc < 2)
    usage("no plan given (see ninfer --help)");
  return runGenerate(argc, argv);
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ninfer: error: %s\n", e.message.c_str());
    return kExitUsage;
  } catch (const Failure& e) {
    std::fprintf(stderr, "ninfer: error: %s\n", e.message.c_str());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ninfer: error: out of memory\n");
    return kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ninfer: error: %s\n", e.what());
    return kExitError;
  } catch (...) {
    std::fprintf(stderr, "ninfer: error: unexpected failure\n");
    return kExitError;
  }
}
