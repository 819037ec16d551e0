// The ninfer CLI end to end on small plans: exit codes, one-line errors, ids
// output equal to the library's generation, --dump-logits and inspect.
#include "TestModel.h"

#include "ninfer/Executor.h"
#include "ninfer/Generator.h"
#include "ninfer/Plan.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/wait.h>

namespace ninfer {
namespace test {
namespace {

struct CliResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

CliResult runCli(const std::string& args, const std::string& stdinPath = "/dev/null") {
  const std::string out = tempPath("cli.out"), err = tempPath("cli.err");
  const std::string command =
      std::string(NINFER_CLI_PATH) + " " + args + " >" + out + " 2>" + err + " <" + stdinPath;
  const int status = std::system(command.c_str());
  CliResult r;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readAll(out);
  r.err = readAll(err);
  return r;
}

void expectOneErrorLine(const CliResult& r, int exitCode, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, exitCode) << r.err;
  EXPECT_EQ(r.err.rfind("ninfer: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

TEST(Cli, HelpAndVersion) {
  CliResult help = runCli("--help");
  EXPECT_EQ(help.exitCode, 0);
  for (const char* option : {"-p, --prompt TEXT", "-f, --file FILE", "--prompt-ids", "--temp",
                             "--top-k", "--top-p", "--seed", "--device", "--threads", "--print-ids",
                             "--dump-logits", "--ignore-eos", "--no-bos", "inspect"})
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  // Subcommands have their own pages.
  CliResult inspect = runCli("inspect --help");
  EXPECT_EQ(inspect.exitCode, 0);
  EXPECT_NE(inspect.out.find("ninfer inspect PLAN [--json]"), std::string::npos) << inspect.out;
  EXPECT_EQ(inspect.out.find("--top-k"), std::string::npos) << inspect.out;
  CliResult version = runCli("--version");
  EXPECT_EQ(version.exitCode, 0);
  EXPECT_EQ(version.out.rfind("ninfer ", 0), 0u);
}

TEST(Cli, UsageErrorsExitWithTwo) {
  expectOneErrorLine(runCli(""), 2, "no plan given");
  expectOneErrorLine(runCli("plan.nplan --frobnicate"), 2, "unknown option '--frobnicate'");
  expectOneErrorLine(runCli("plan.nplan -p hi -n"), 2, "-n needs a value");
  expectOneErrorLine(runCli("plan.nplan -p hi -n x"), 2, "-n expects an integer");
  expectOneErrorLine(runCli("plan.nplan -p hi --top-p 2"), 2, "--top-p expects a number");
  expectOneErrorLine(runCli("plan.nplan -p hi --device tpu"), 2, "--device expects");
  expectOneErrorLine(runCli("plan.nplan -p hi --prompt-ids 1"), 2, "only one of");
  expectOneErrorLine(runCli("plan.nplan"), 2, "no prompt");
  expectOneErrorLine(runCli("plan.nplan --prompt-ids 1,x"), 2, "--prompt-ids expects");
  expectOneErrorLine(runCli("inspect"), 2, "inspect needs a plan");
}

TEST(Cli, FailuresExitWithOne) {
  expectOneErrorLine(runCli(tempPath("missing.nplan") + " -p hi"), 1, "cannot open");
  const std::string garbage = tempPath("garbage.nplan");
  writeFile(garbage, std::vector<uint8_t>(5000, 0x41));
  expectOneErrorLine(runCli(garbage + " --prompt-ids 1"), 1, "not a ninfer plan");
  expectOneErrorLine(runCli("inspect " + garbage), 1, "not a ninfer plan");

  TinyModel model = buildTinyModel(TinyModelSpec());
  const std::string path = model.maker.write("cli_errors.nplan");
  expectOneErrorLine(runCli(path + " -p hello --device cpu"), 1,
                     "this plan has no tokenizer: use --prompt-ids");
  expectOneErrorLine(runCli(path + " --prompt-ids 1,99 --device cpu"), 1,
                     "prompt id 99 is outside the vocabulary (37)");
  std::string longPrompt = "0";
  for (int i = 1; i < 41; ++i)
    longPrompt += ",1";
  expectOneErrorLine(runCli(path + " --prompt-ids " + longPrompt + " --device cpu"), 1,
                     "prompt has 41 tokens but the plan's context is 40");
}

// Output paths are checked before the plan is even opened (a bench of a large plan runs for
// minutes): with a missing plan too, the error names the output.
TEST(Cli, UnwritableOutputsAreRefusedFirst) {
  const std::string missingPlan = tempPath("absent.nplan");
  const std::string noDir = tempPath("no_such_dir") + "/out";
  const std::string dir = tempPath("an_output_dir");
  std::filesystem::create_directories(dir);
  expectOneErrorLine(runCli(missingPlan + " --prompt-ids 1 --dump-logits " + noDir), 1,
                     "cannot write " + noDir + ": No such file or directory");
  expectOneErrorLine(runCli(missingPlan + " --prompt-ids 1 --dump-logits " + dir), 1,
                     "cannot write " + dir + ": it is a directory");
  expectOneErrorLine(runCli("bench " + missingPlan + " --plot " + noDir + ".png"), 1,
                     "cannot write " + noDir + ".png: No such file or directory");
  expectOneErrorLine(runCli("bench " + missingPlan + " --timeline " + dir), 1,
                     "cannot write " + dir + ": it is a directory");
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a probe file was left behind";
  // A writable output does not stop them: the missing plan does.
  expectOneErrorLine(runCli("bench " + missingPlan + " --plot " + dir + "/p.png"), 1,
                     "cannot open");
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a probe file was left behind";
}

// What the library generates greedily from `prompt` on the CPU executor (ignoring EOS): the
// reference ninfer's output is held to.
struct LibraryRun {
  bool ok = false;
  std::string ids; // comma-separated, as --print-ids prints them
  GenerationStats stats;
  std::vector<float> promptLogits;
  int context = 0;
};
LibraryRun generateWithLibrary(const std::string& path, const std::vector<int32_t>& prompt,
                               int maxNewTokens) {
  LibraryRun run;
  auto file = PlanFile::open(path);
  if (!file.isOk()) {
    ADD_FAILURE() << file.status().message();
    return run;
  }
  auto executor = createCpuExecutor(*file.value(), 1);
  if (!executor.isOk()) {
    ADD_FAILURE() << executor.status().message();
    return run;
  }
  GenerationConfig config = GenerationConfig::fromPlan(*file.value());
  config.maxNewTokens = maxNewTokens;
  config.ignoreEos = true;
  Generator generator(*executor.value(), config);
  Sampler greedy(SamplingParams{});
  auto stats = generator.generate(prompt, greedy, [&](int32_t id) {
    run.ids += (run.ids.empty() ? "" : ",") + std::to_string(id);
    return true;
  });
  if (!stats.isOk()) {
    ADD_FAILURE() << stats.status().message();
    return run;
  }
  run.ok = true;
  run.stats = *stats;
  run.promptLogits = generator.promptLogits();
  run.context = config.context;
  return run;
}

TEST(Cli, PrintIdsMatchesTheLibraryAndDumpsLogits) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  const std::string path = model.maker.write("cli_gen.nplan");
  const std::string logitsPath = tempPath("cli_logits.bin");
  std::remove(logitsPath.c_str());
  CliResult r = runCli(path +
                       " --prompt-ids 3,1,4,1,5,9,2,6,5,3 -n 7 --ignore-eos --device cpu "
                       "--threads 2 --print-ids --dump-logits " +
                       logitsPath);
  ASSERT_EQ(r.exitCode, 0) << r.err;

  const LibraryRun expected = generateWithLibrary(path, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, 7);
  ASSERT_TRUE(expected.ok);
  EXPECT_EQ(r.out, expected.ids + "\n");
  EXPECT_NE(r.err.find("prompt 10 tokens, generated 7 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("executor cpu (2 threads)"), std::string::npos) << r.err;

  const std::string bytes = readAll(logitsPath);
  ASSERT_EQ(bytes.size(), 4u * model.spec.vocab);
  std::vector<float> logits(model.spec.vocab);
  std::memcpy(logits.data(), bytes.data(), bytes.size()); // the test machine is little-endian
  EXPECT_EQ(logits, expected.promptLogits);
}

// A generation that reaches the plan's context before -n says so, with the library's count.
TEST(Cli, SaysWhenTheContextEndsAGeneration) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  const std::string path = model.maker.write("cli_context_end.nplan");
  const LibraryRun expected = generateWithLibrary(path, {3, 1, 4}, 1000);
  ASSERT_TRUE(expected.ok);
  ASSERT_TRUE(expected.stats.stoppedAtContext);
  const std::string cut = "generated " + std::to_string(expected.stats.generatedTokens) +
                          " tokens (stopped at the plan's context of " +
                          std::to_string(expected.context) + " positions; ninferc --ctx sets it)";
  CliResult r = runCli(path + " --prompt-ids 3,1,4 -n 1000 --ignore-eos --device cpu --print-ids");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  EXPECT_EQ(r.out, expected.ids + "\n");
  // Where -n ends it first, nothing is said.
  r = runCli(path + " --prompt-ids 3,1,4 -n 5 --ignore-eos --device cpu --print-ids");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("generated 5 tokens,"), std::string::npos) << r.err;
}

// A byte-level tokenizer whose tokens are single characters: the text printed
// must be the characters of the ids --print-ids reports, for -p, -f and -p -.
TEST(Cli, TextModeStreamsDecodedText) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  plan::TokenizerT& tok = *model.maker.plan.tokenizer;
  tok.kind = plan::TokenizerKind::ByteLevelBpe;
  std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (char c : alphabet)
    tok.tokens.push_back(std::string(1, c));
  tok.tokens.push_back("\xC4\xA0"); // U+0120, GPT-2's byte-level spelling of a space
  alphabet += ' ';
  const std::string path = model.maker.write("cli_text.nplan");

  CliResult ids = runCli(path + " -p abc -n 6 --ignore-eos --device cpu --print-ids");
  ASSERT_EQ(ids.exitCode, 0) << ids.err;
  std::string expectedText;
  std::stringstream stream(ids.out);
  std::string item;
  while (std::getline(stream, item, ','))
    expectedText += alphabet[std::stoi(item)];
  ASSERT_EQ(expectedText.size(), 6u);

  CliResult text = runCli(path + " -p abc -n 6 --ignore-eos --device cpu");
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_EQ(text.out, expectedText); // no newline added when stdout is not a terminal
  EXPECT_NE(text.err.find("prompt 3 tokens, generated 6 tokens"), std::string::npos) << text.err;

  const std::string promptFile = tempPath("prompt.txt");
  writeFile(promptFile, {'a', 'b', 'c'});
  EXPECT_EQ(runCli(path + " -f " + promptFile + " -n 6 --ignore-eos --device cpu").out,
            expectedText);
  EXPECT_EQ(runCli(path + " -p - -n 6 --ignore-eos --device cpu", promptFile).out, expectedText);
  expectOneErrorLine(runCli(path + " -f " + tempPath("nope.txt") + " --device cpu"), 1,
                     "cannot read prompt file");
}

TEST(Cli, AutoDeviceFallsBackToCpuAndSays) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  const std::string path = model.maker.write("cli_auto.nplan");
  CliResult r = runCli(path + " --prompt-ids 1,2 -n 2 --print-ids");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("ninfer: device: cpu"), std::string::npos) << r.err;
}

TEST(Cli, InspectTextAndJson) {
  TinyModel model = buildTinyModel(TinyModelSpec());
  model.maker.plan.model->source = "weird \"path\"\\\n";
  const std::string path = model.maker.write("cli_inspect.nplan");
  CliResult text = runCli("inspect " + path);
  ASSERT_EQ(text.exitCode, 0) << text.err;
  for (const char* fragment :
       {"format version:  1", "context:         40", "max_step_tokens: 8", "layers.1.attention",
        "Attention", "dummy weights:   no", "KvCache 4", "Weight"})
    EXPECT_NE(text.out.find(fragment), std::string::npos) << fragment << "\n" << text.out;
  CliResult json = runCli("inspect " + path + " --json");
  ASSERT_EQ(json.exitCode, 0) << json.err;
  EXPECT_NE(json.out.find("\"source\": \"weird \\\"path\\\"\\\\\\n\""), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"context\": 40"), std::string::npos);
  EXPECT_NE(json.out.find("\"kind\": \"Linear\""), std::string::npos);
  // Parsed by Python's json module when available (an independent parser).
  const std::string jsonPath = tempPath("inspect.json");
  writeFile(jsonPath, std::vector<uint8_t>(json.out.begin(), json.out.end()));
  const std::string check = "python3 -c \"import json,sys; d=json.load(open('" + jsonPath +
                            "')); sys.exit(0 if d['context']==40 and len(d['ops'])>10 else 3)\"";
  const int status = std::system(check.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) != 127) {
    EXPECT_EQ(WEXITSTATUS(status), 0) << json.out;
  }
}

// Pixels of a PNG written by ninfer bench --plot (8-bit RGB, no filter, stored
// deflate blocks: what its writer produces), as rows of width x 3 bytes; empty if
// the file is not such a PNG.
std::vector<std::vector<uint8_t>> readPlotPixels(const std::string& path, int& width, int& height) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  auto be32 = [&](size_t at) {
    return uint32_t(file[at]) << 24 | uint32_t(file[at + 1]) << 16 | uint32_t(file[at + 2]) << 8 |
           file[at + 3];
  };
  if (file.size() < 33 || std::string(file.begin() + 1, file.begin() + 4) != "PNG")
    return {};
  width = int(be32(16));
  height = int(be32(20));
  std::vector<uint8_t> zlib;
  for (size_t at = 8; at + 12 <= file.size();) {
    const uint32_t length = be32(at);
    if (std::string(file.begin() + at + 4, file.begin() + at + 8) == "IDAT")
      zlib.insert(zlib.end(), file.begin() + at + 8, file.begin() + at + 8 + length);
    at += 12 + length;
  }
  std::vector<uint8_t> raw;
  for (size_t at = 2; at + 5 <= zlib.size();) { // stored blocks after the zlib header
    const bool last = zlib[at] & 1;
    const size_t length = zlib[at + 1] | size_t(zlib[at + 2]) << 8;
    raw.insert(raw.end(), zlib.begin() + at + 5, zlib.begin() + at + 5 + length);
    at += 5 + length;
    if (last)
      break;
  }
  const size_t stride = size_t(width) * 3 + 1;
  if (raw.size() != stride * size_t(height))
    return {};
  std::vector<std::vector<uint8_t>> rows;
  for (int y = 0; y < height; ++y)
    rows.emplace_back(raw.begin() + y * stride + 1, raw.begin() + (y + 1) * stride);
  return rows;
}

// Dark pixels in rows [y0, y1) of a plot.
int inkInRows(const std::vector<std::vector<uint8_t>>& rows, int y0, int y1) {
  int ink = 0;
  for (int y = y0; y < y1 && y < int(rows.size()); ++y)
    for (size_t i = 0; i + 2 < rows[size_t(y)].size(); i += 3)
      ink += rows[size_t(y)][i] + rows[size_t(y)][i + 1] + rows[size_t(y)][i + 2] < 200;
  return ink;
}

// ninfer bench --batch on the CPU executor: a row per batch size with the
// ratio to batch 1, the same in JSON, a labelled plot, and clean refusals; where
// the tokens are picked, with and without --batch.
TEST(Cli, BenchBatchSweep) {
  TinyModelSpec spec;
  spec.maxBatch = 4;
  TinyModel model = buildTinyModel(spec);
  const std::string path = model.maker.write("bench_batch.nplan");
  const std::string common = " --device cpu --threads 1 --prompt 3 --gen 2 --warmup 0 --reps 1";
  CliResult table = runCli("bench " + path + common + " --batch 1,2,4");
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("(4 sequences)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("x batch1"), std::string::npos) << table.out;
  // The CPU executor leaves the pick to the host (the GPU's: tests/gpu/GreedyTest.cpp).
  EXPECT_NE(table.out.find("tokens:   the logits to the host"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("memory:   none on a device (the executor runs on the host)"),
            std::string::npos)
      << table.out;
  int rows = 0;
  std::istringstream lines(table.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    int prompt = 0, batch = 0;
    if (fields >> prompt >> batch && prompt == 3) {
      EXPECT_EQ(batch, std::vector<int>({1, 2, 4})[size_t(rows++)]) << line;
    }
  }
  EXPECT_EQ(rows, 3) << table.out;
  // The plot: its title (rows 8-17) and the x axis' name (rows 382-391) are drawn in the
  // margins, where nothing else is.
  const std::string plot = tempPath("batch.png");
  ASSERT_EQ(runCli("bench " + path + common + " --batch 1,2 --plot " + plot).exitCode, 0);
  int width = 0, height = 0;
  const std::vector<std::vector<uint8_t>> pixels = readPlotPixels(plot, width, height);
  ASSERT_EQ(pixels.size(), 400u);
  EXPECT_EQ(width, 640);
  EXPECT_GT(inkInRows(pixels, 8, 18), 100);
  EXPECT_GT(inkInRows(pixels, 382, 392), 50);
  EXPECT_EQ(inkInRows(pixels, 0, 8), 0);
  CliResult json = runCli("bench " + path + common + " --batch 1,4 --json");
  ASSERT_EQ(json.exitCode, 0) << json.err;
  EXPECT_NE(json.out.find("\"batch_runs\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"batch\": 4"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"ratio_to_batch_1\": 1,"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"decode_tok_s_per_sequence\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"token_pick\": \"host\""), std::string::npos) << json.out;
  CliResult single = runCli("bench " + path + common + " --json");
  ASSERT_EQ(single.exitCode, 0) << single.err;
  EXPECT_NE(single.out.find("\"runs\""), std::string::npos) << single.out;
  EXPECT_NE(single.out.find("\"token_pick\": \"host\""), std::string::npos) << single.out;
  expectOneErrorLine(runCli("bench " + path + common + " --batch 8"), 2,
                     "--batch 8 exceeds the 4 sequences the plan holds: compile it with ninferc "
                     "--batch 8");
  expectOneErrorLine(runCli("bench " + path + " --batch 0"), 2,
                     "--batch expects an integer in [1, 8], got '0'");
  // --profile and --timeline need the GPU: refused before the runs, not after them.
  for (const char* batches : {"", " --batch 1,2"}) {
    CliResult profile = runCli("bench " + path + common + batches + " --profile");
    expectOneErrorLine(profile, 1, "--profile times kernels on the GPU, and this run uses cpu");
    EXPECT_TRUE(profile.out.empty()) << profile.out;
    const std::string trace = tempPath("timeline.json");
    CliResult timeline = runCli("bench " + path + common + batches + " --timeline " + trace);
    expectOneErrorLine(timeline, 1, "--timeline traces kernels on the GPU, and this run uses cpu");
    EXPECT_TRUE(timeline.out.empty()) << timeline.out;
    EXPECT_FALSE(std::ifstream(trace).good()) << "no timeline file after a refusal";
  }
  expectOneErrorLine(runCli("bench " + path + common + " --json --timeline t.json"), 2,
                     "--timeline prints a table; it cannot be combined with --json");
  CliResult help = runCli("bench --help");
  EXPECT_NE(help.out.find("--batch B[,B...]"), std::string::npos) << help.out;
}

// ninfer bench with sampling on the CPU executor: the report and the JSON say how the tokens
// are picked and with what; sampling with --batch and bad values are refused, as generation
// refuses them.
TEST(Cli, BenchSampling) {
  TinyModel model = buildTinyModel(TinyModelSpec{});
  const std::string path = model.maker.write("bench_sampling.nplan");
  const std::string common = " --device cpu --threads 1 --prompt 3 --gen 4 --warmup 0 --reps 1";
  CliResult table = runCli("bench " + path + common + " --temp 0.8 --top-p 0.9 --seed 3");
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("sampling: temperature 0.8, top-k 0, top-p 0.9, seed 3"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("tokens:   the logits to the host, which picks"), std::string::npos)
      << table.out;
  CliResult json = runCli("bench " + path + common + " --temp 0.5 --top-k 5 --json");
  ASSERT_EQ(json.exitCode, 0) << json.err;
  EXPECT_NE(json.out.find("\"sampling\": {\"temperature\": 0.5, \"top_k\": 5, \"top_p\": 1, "
                          "\"seed\": 0}"),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"token_pick\": \"host\""), std::string::npos) << json.out;
  // The CPU executor brings every step's logits to the host: 4 steps of one run.
  EXPECT_NE(json.out.find("\"decode_steps\": 4,\n  \"logits_to_host_steps\": 4,"),
            std::string::npos)
      << json.out;
  expectOneErrorLine(runCli("bench " + path + common + " --batch 1 --temp 0.8"), 2,
                     "--batch steps pick greedy tokens");
  expectOneErrorLine(runCli("bench " + path + common + " --top-p 2"), 2,
                     "--top-p expects a number in [0, 1], got '2'");
  expectOneErrorLine(runCli("bench " + path + common + " --seed -1"), 2,
                     "--seed expects a non-negative integer, got '-1'");
  EXPECT_NE(runCli("bench --help").out.find("--temp T, --top-k K, --top-p P, --seed S"),
            std::string::npos);
}

} // namespace
} // namespace test
} // namespace ninfer
