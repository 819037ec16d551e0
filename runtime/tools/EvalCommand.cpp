// `ninfer perplexity` and `ninfer kld`: argument parsing, tokenizing the text
// with the plan's tokenizer, choosing executors, and printing the report (text
// laid out like llama-perplexity's, or one JSON object with --json). The
// evaluation itself is ninfer::eval (Evaluation.h).
#include "EvalCommand.h"

#include "CliCommon.h"

#include "ninfer/Evaluation.h"
#include "ninfer/Executor.h"
#include "ninfer/Json.h"
#include "ninfer/Plan.h"
#include "ninfer/Progress.h"
#include "ninfer/Tokenizer.h"
#include "plan_generated.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer {
namespace {

using cli::failWith;
using cli::take;
using cli::usage;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char* const kPerplexityHelp =
    R"(usage: ninfer perplexity PLAN --file TEXT [options]

Perplexity of the plan on TEXT, by llama.cpp's method: the whole text is tokenized (with BOS
when the tokenizer adds one), cut into chunks of --ctx tokens whose first token is replaced by
BOS, and the second half of every chunk is scored. Prints PPL = exp(mean NLL) +/- its standard
error.

options:
  --file TEXT           the text to score (required)
  --ctx N               tokens per chunk (default 512; at most the plan's context)
  --max-chunks N        score at most the first N chunks (default: all whole chunks)
  --device D            cuda, cpu or auto (default auto)
  --threads N           CPU executor threads (default: all hardware threads)
  --no-bos              no BOS at all: neither at the start of the text nor of each chunk
  --json                print one JSON object instead of the text report
)";

const char* const kKldHelp =
    R"(usage: ninfer kld PLAN --ref REF.nplan --file TEXT [options]

KL divergence KL(REF || PLAN) over the scored positions of TEXT (the same chunks and positions as
`ninfer perplexity`), with both perplexities, their ratio, KLD percentiles and how often the two
plans agree on the most likely token. Both plans must share the tokenizer.

options:
  --ref REF.nplan       the reference plan, e.g. the unquantized model (required)
  --file TEXT           the text to score (required)
  --ctx N               tokens per chunk (default 512)
  --max-chunks N        score at most the first N chunks
  --device D            cuda, cpu or auto, for both plans (default auto)
  --threads N           CPU executor threads (default: all hardware threads)
  --no-bos              no BOS at the start of the text or of each chunk
  --json                print one JSON object instead of the text report
)";

struct EvalOptions {
  bool kld = false;
  bool help = false;
  std::string planPath;
  std::string refPath;
  std::string textPath;
  int ctx = 512;
  int maxChunks = 0;
  std::string device = "auto";
  int threads = 0;
  bool noBos = false;
  bool json = false;
};

EvalOptions parseOptions(int argc, char** argv, bool kld) {
  EvalOptions o;
  o.kld = kld;
  const char* command = kld ? "kld" : "perplexity";
  int i = argc > 1 && std::string(argv[1]) == command ? 2 : 1;
  auto value = [&](const std::string& option, const std::string& inlineValue, bool hasInline) {
    if (hasInline)
      return inlineValue;
    if (i + 1 >= argc)
      usage(option + " needs a value");
    return std::string(argv[++i]);
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    std::string inlineValue;
    bool hasInline = false;
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        inlineValue = arg.substr(eq + 1);
        hasInline = true;
        arg.resize(eq);
      }
    }
    auto noValue = [&] {
      if (hasInline)
        usage(arg + " takes no value");
    };
    if (arg == "--help" || arg == "-h") {
      o.help = true;
    } else if (arg == "--file" || arg == "-f") {
      o.textPath = value(arg, inlineValue, hasInline);
    } else if (arg == "--ref" && kld) {
      o.refPath = value(arg, inlineValue, hasInline);
    } else if (arg == "--ctx" || arg == "-c") {
      o.ctx = int(cli::integerOption(arg, value(arg, inlineValue, hasInline), 4, 1 << 24));
    } else if (arg == "--max-chunks") {
      o.maxChunks = int(cli::integerOption(arg, value(arg, inlineValue, hasInline), 1, INT32_MAX));
    } else if (arg == "--device") {
      o.device = value(arg, inlineValue, hasInline);
      if (o.device != "cuda" && o.device != "cpu" && o.device != "auto")
        usage("--device expects cuda, cpu or auto, got '" + o.device + "'");
    } else if (arg == "--threads") {
      o.threads = int(cli::integerOption(arg, value(arg, inlineValue, hasInline), 1, 4096));
    } else if (arg == "--no-bos") {
      noValue();
      o.noBos = true;
    } else if (arg == "--json") {
      noValue();
      o.json = true;
    } else if (!arg.empty() && arg[0] == '-') {
      usage("unknown option '" + arg + "' for " + command + " (see ninfer " + command + " --help)");
    } else if (o.planPath.empty()) {
      o.planPath = arg;
    } else {
      usage("unexpected argument '" + arg + "' (one plan" +
            (kld ? std::string("; the reference goes after --ref)") : std::string(")")));
    }
  }
  if (o.help)
    return o;
  if (o.planPath.empty())
    usage(std::string(command) + " needs a plan: ninfer " + command +
          (kld ? " PLAN --ref REF.nplan --file TEXT" : " PLAN --file TEXT"));
  if (kld && o.refPath.empty())
    usage("kld needs the reference plan: --ref REF.nplan");
  if (o.textPath.empty())
    usage(std::string(command) + " needs a text: --file TEXT");
  return o;
}

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    failWith("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad())
    failWith("cannot read " + path);
  return os.str();
}

bool planHasGpuCode(const plan::Plan& p) {
  const plan::KernelModule* k = p.kernels();
  return k && k->functions() && k->functions()->size() > 0 &&
         ((k->cubins() && k->cubins()->size() > 0) || (k->ptx() && k->ptx()->size() > 0));
}

// As `ninfer PLAN`: cuda when usable, else cpu; the choice is reported on `err`.
std::unique_ptr<Executor> makeExecutor(const PlanFile& file, const EvalOptions& o, const char* what,
                                       std::FILE* err) {
  if (o.device == "cpu")
    return take(createCpuExecutor(file, o.threads));
  if (o.device == "cuda")
    return take(createCudaExecutor(file, 0));
  if (!planHasGpuCode(file.plan())) {
    std::fprintf(err, "ninfer: %s device: cpu (the plan carries no GPU kernels)\n", what);
    return take(createCpuExecutor(file, o.threads));
  }
  Result<std::unique_ptr<Executor>> cuda = createCudaExecutor(file, 0);
  if (cuda.isOk()) {
    std::fprintf(err, "ninfer: %s device: cuda\n", what);
    return std::move(cuda.value());
  }
  std::fprintf(err, "ninfer: %s device: cpu (cuda unavailable: %s)\n", what,
               cuda.status().message().c_str());
  return take(createCpuExecutor(file, o.threads));
}

const plan::Tokenizer& planTokenizer(const PlanFile& file) {
  const plan::Tokenizer* table = file.plan().tokenizer();
  if (!table || table->kind() == plan::TokenizerKind::None)
    failWith("the plan " + file.path() + " carries no tokenizer, so it cannot read a text");
  return *table;
}

// BOS that replaces the first token of every chunk: the tokenizer's, when it
// adds one (llama.cpp does this exactly when its vocabulary says add_bos).
int32_t chunkBos(const plan::Tokenizer& table, bool noBos) {
  return !noBos && table.add_bos() && table.bos_id() >= 0 ? table.bos_id() : -1;
}

std::vector<int32_t> tokenizeText(const PlanFile& file, const std::string& text, bool noBos) {
  std::unique_ptr<Tokenizer> tokenizer = take(Tokenizer::fromPlan(&planTokenizer(file)));
  return take(tokenizer->encode(text, !noBos));
}

std::string tokenText(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* tokens,
                      uint32_t i) {
  return tokens && i < tokens->size() && tokens->Get(i) ? tokens->Get(i)->str() : std::string();
}

// The two plans must read the text the same way: same vocabulary, same BOS
// rule, and (what matters in the end) the same ids for this text.
void checkSameTokenizer(const PlanFile& plan, const PlanFile& ref) {
  const plan::Tokenizer& a = planTokenizer(plan);
  const plan::Tokenizer& b = planTokenizer(ref);
  const int vocabA = plan.plan().model() ? plan.plan().model()->vocab_size() : 0;
  const int vocabB = ref.plan().model() ? ref.plan().model()->vocab_size() : 0;
  if (vocabA != vocabB)
    failWith("the plans have different vocabularies (" + std::to_string(vocabA) + " and " +
             std::to_string(vocabB) + " tokens): KL divergence needs the same tokenizer");
  if (a.kind() != b.kind())
    failWith("the plans have different kinds of tokenizer: KL divergence needs the same one");
  const uint32_t countA = a.tokens() ? a.tokens()->size() : 0;
  const uint32_t countB = b.tokens() ? b.tokens()->size() : 0;
  if (countA != countB)
    failWith("the plans' tokenizers differ (" + std::to_string(countA) + " and " +
             std::to_string(countB) + " tokens): KL divergence needs the same tokenizer");
  for (uint32_t i = 0; i < countA; ++i)
    if (tokenText(a.tokens(), i) != tokenText(b.tokens(), i))
      failWith("the plans' tokenizers differ at token " + std::to_string(i) +
               ": KL divergence needs the same tokenizer");
  if (a.bos_id() != b.bos_id() || a.add_bos() != b.add_bos())
    failWith("the plans' tokenizers differ in their BOS token: KL divergence needs the same one");
}

std::string jsonNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.10g", value);
  return buffer;
}

// Key/value pairs of one JSON object, in insertion order.
class JsonObject {
public:
  void add(const std::string& key, const std::string& rawValue) {
    text_ += (text_.empty() ? "{" : ", ") + json::quoted(key) + ": " + rawValue;
  }
  void addString(const std::string& key, const std::string& value) { add(key, json::quoted(value)); }
  void addNumber(const std::string& key, double value) { add(key, jsonNumber(value)); }
  void addInt(const std::string& key, long long value) { add(key, std::to_string(value)); }
  void addBool(const std::string& key, bool value) { add(key, value ? "true" : "false"); }
  void addEstimate(const std::string& key, const eval::Estimate& e) {
    addNumber(key, e.value);
    addNumber(key + "_uncertainty", e.uncertainty);
  }
  std::string str() const { return text_.empty() ? "{}" : text_ + "}"; }

private:
  std::string text_;
};

void check(const Status& status) {
  if (!status.isOk())
    failWith(status.message());
}

struct Setup {
  std::unique_ptr<PlanFile> plan;
  std::unique_ptr<PlanFile> ref;
  std::vector<int32_t> tokens;
  eval::ChunkLayout layout;
  int32_t bosId = -1;
};

Setup prepare(const EvalOptions& o) {
  Setup s;
  s.plan = take(PlanFile::open(o.planPath));
  if (o.kld)
    s.ref = take(PlanFile::open(o.refPath));
  const eval::ExecutorLimits limits = eval::ExecutorLimits::fromPlan(*s.plan);
  check(eval::checkLimits(limits, o.ctx, "plan"));
  if (s.ref)
    check(eval::checkLimits(eval::ExecutorLimits::fromPlan(*s.ref), o.ctx, "reference plan"));
  if (s.ref)
    checkSameTokenizer(*s.plan, *s.ref);
  const std::string text = readText(o.textPath);
  s.tokens = tokenizeText(*s.plan, text, o.noBos);
  if (s.ref && tokenizeText(*s.ref, text, o.noBos) != s.tokens)
    failWith("the plans tokenize the text differently: KL divergence needs the same tokenizer");
  s.bosId = chunkBos(planTokenizer(*s.plan), o.noBos);
  s.layout = take(eval::layoutChunks(s.tokens.size(), o.ctx, o.maxChunks));
  return s;
}

std::string describeChunks(const Setup& s) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer),
                "%zu tokens, %d chunks of %d, %lld scored positions (%d..%d of each chunk), %s",
                s.tokens.size(), s.layout.chunks, s.layout.ctx,
                static_cast<long long>(s.layout.scoredTokens()), s.layout.firstScored,
                s.layout.ctx - 2, s.bosId >= 0 ? "BOS starts each chunk" : "no BOS");
  return buffer;
}

void addCommonJson(JsonObject& j, const EvalOptions& o, const Setup& s, double seconds) {
  j.addString("plan", o.planPath);
  if (o.kld)
    j.addString("ref", o.refPath);
  j.addString("file", o.textPath);
  j.addInt("ctx", s.layout.ctx);
  j.addInt("text_tokens", static_cast<long long>(s.tokens.size()));
  j.addInt("chunks", s.layout.chunks);
  j.addInt("scored_tokens", static_cast<long long>(s.layout.scoredTokens()));
  j.addBool("bos_per_chunk", s.bosId >= 0);
  j.addNumber("seconds", seconds);
}

int runPerplexity(const EvalOptions& o, std::FILE* out, std::FILE* err) {
  Setup s = prepare(o);
  std::unique_ptr<Executor> executor = makeExecutor(*s.plan, o, "plan", err);
  const eval::ExecutorLimits limits = eval::ExecutorLimits::fromPlan(*s.plan);
  Progress progress("perplexity", uint64_t(s.layout.chunks));
  const auto start = std::chrono::steady_clock::now();
  eval::PerplexityAccumulator acc =
      take(eval::evaluatePerplexity(*executor, limits, s.tokens, s.layout, s.bosId,
                                    [&](int done) { progress.update(uint64_t(done)); }));
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const eval::Estimate nll = acc.meanNll();
  const eval::Estimate ppl = acc.perplexity();
  if (o.json) {
    JsonObject j;
    addCommonJson(j, o, s, seconds);
    j.addString("executor", executor->name());
    j.addEstimate("mean_nll", nll);
    j.addEstimate("ppl", ppl);
    std::fprintf(out, "%s\n", j.str().c_str());
  } else {
    std::fprintf(out, "perplexity of %s on %s\n", o.planPath.c_str(), o.textPath.c_str());
    std::fprintf(out, "  %s\n", describeChunks(s).c_str());
    std::fprintf(out, "  executor %s, %.1f s (%.0f scored tokens/s)\n", executor->name().c_str(),
                 seconds, seconds > 0 ? double(acc.count()) / seconds : 0.0);
    std::fprintf(out, "  mean NLL = %.6f +/- %.6f\n", nll.value, nll.uncertainty);
    std::fprintf(out, "Final estimate: PPL = %.4f +/- %.5f\n", ppl.value, ppl.uncertainty);
  }
  return 0;
}

int runKld(const EvalOptions& o, std::FILE* out, std::FILE* err) {
  Setup s = prepare(o);
  std::unique_ptr<Executor> ref = makeExecutor(*s.ref, o, "reference", err);
  std::unique_ptr<Executor> executor = makeExecutor(*s.plan, o, "plan", err);
  Progress progress("kld", uint64_t(s.layout.chunks));
  const auto start = std::chrono::steady_clock::now();
  eval::KldAccumulator acc =
      take(eval::evaluateKld(*ref, eval::ExecutorLimits::fromPlan(*s.ref), *executor,
                             eval::ExecutorLimits::fromPlan(*s.plan), s.tokens, s.layout, s.bosId,
                             [&](int done) { progress.update(uint64_t(done)); }));
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const eval::KldStats k = acc.stats();
  if (o.json) {
    JsonObject j;
    addCommonJson(j, o, s, seconds);
    j.addString("executor", executor->name());
    j.addString("ref_executor", ref->name());
    j.addEstimate("ppl", k.ppl);
    j.addEstimate("ref_ppl", k.refPpl);
    j.addEstimate("ln_ppl_ratio", k.logPplRatio);
    j.addEstimate("ppl_ratio", k.pplRatio);
    j.addNumber("nll_correlation", k.nllCorrelation);
    j.addEstimate("kld", k.kld);
    j.addNumber("kld_max", k.kldMax);
    j.addNumber("kld_p99_9", k.kld999);
    j.addNumber("kld_p99", k.kld99);
    j.addNumber("kld_p95", k.kld95);
    j.addNumber("kld_p90", k.kld90);
    j.addNumber("kld_median", k.kldMedian);
    j.addNumber("kld_p10", k.kld10);
    j.addNumber("kld_min", k.kldMin);
    j.addEstimate("same_top", k.sameTop);
    j.addEstimate("rms_delta_p", k.rmsDeltaP);
    std::fprintf(out, "%s\n", j.str().c_str());
    return 0;
  }
  std::fprintf(out, "KL divergence of %s from %s on %s\n", o.planPath.c_str(), o.refPath.c_str(),
               o.textPath.c_str());
  std::fprintf(out, "  %s\n", describeChunks(s).c_str());
  std::fprintf(out, "  executors %s (plan), %s (reference), %.1f s\n", executor->name().c_str(),
               ref->name().c_str(), seconds);
  std::fprintf(out, "====== Perplexity statistics ======\n");
  std::fprintf(out, "Mean PPL(Q)                   : %10.6f +/- %10.6f\n", k.ppl.value,
               k.ppl.uncertainty);
  std::fprintf(out, "Mean PPL(base)                : %10.6f +/- %10.6f\n", k.refPpl.value,
               k.refPpl.uncertainty);
  std::fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * k.nllCorrelation);
  std::fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", k.logPplRatio.value,
               k.logPplRatio.uncertainty);
  std::fprintf(out, "Mean PPL(Q)/PPL(base)         : %10.6f +/- %10.6f\n", k.pplRatio.value,
               k.pplRatio.uncertainty);
  std::fprintf(out, "====== KL divergence statistics ======\n");
  std::fprintf(out, "Mean    KLD: %10.6f +/- %10.6f\n", k.kld.value, k.kld.uncertainty);
  std::fprintf(out, "Maximum KLD: %10.6f\n", k.kldMax);
  std::fprintf(out, "99.9%%   KLD: %10.6f\n", k.kld999);
  std::fprintf(out, "99.0%%   KLD: %10.6f\n", k.kld99);
  std::fprintf(out, "95.0%%   KLD: %10.6f\n", k.kld95);
  std::fprintf(out, "90.0%%   KLD: %10.6f\n", k.kld90);
  std::fprintf(out, "Median  KLD: %10.6f\n", k.kldMedian);
  std::fprintf(out, "10.0%%   KLD: %10.6f\n", k.kld10);
  std::fprintf(out, "Minimum KLD: %10.6f\n", k.kldMin);
  std::fprintf(out, "====== Token probability statistics ======\n");
  std::fprintf(out, "RMS dp     : %6.3f +/- %5.3f %%\n", 100.0 * k.rmsDeltaP.value,
               100.0 * k.rmsDeltaP.uncertainty);
  std::fprintf(out, "Same top p : %6.3f +/- %5.3f %%\n", 100.0 * k.sameTop.value,
               100.0 * k.sameTop.uncertainty);
  return 0;
}

int runCommand(int argc, char** argv, bool kld, std::FILE* out, std::FILE* err) {
  try {
    const EvalOptions o = parseOptions(argc, argv, kld);
    if (o.help) {
      std::fputs(kld ? kKldHelp : kPerplexityHelp, out);
      return 0;
    }
    const int rc = kld ? runKld(o, out, err) : runPerplexity(o, out, err);
    std::fflush(out);
    return rc;
  } catch (const cli::UsageError& e) {
    std::fprintf(err, "ninfer: error: %s\n", e.message.c_str());
    return kExitUsage;
  } catch (const cli::Failure& e) {
    std::fprintf(err, "ninfer: error: %s\n", e.message.c_str());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(err, "ninfer: error: out of memory\n");
    return kExitError;
  } catch (const std::exception& e) {
    std::fprintf(err, "ninfer: error: %s\n", e.what());
    return kExitError;
  }
}

} // namespace

int runPerplexityCommand(int argc, char** argv, std::FILE* out, std::FILE* err) {
  return runCommand(argc, argv, false, out, err);
}

int runKldCommand(int argc, char** argv, std::FILE* out, std::FILE* err) {
  return runCommand(argc, argv, true, out, err);
}

int runPerplexityCommand(int argc, char** argv) {
  return runPerplexityCommand(argc, argv, stdout, stderr);
}

int runKldCommand(int argc, char** argv) { return runKldCommand(argc, argv, stdout, stderr); }

} // namespace ninfer
