// `ninfer chat` and `ninfer tokenize` (runtime/tools/ChatCommand.cpp) on the
// tiny test model with a one-character-per-token tokenizer and a ChatML
// template: each answer must be what the Generator produces for the rendered
// conversation, history must carry over, /reset must clear it, and errors must
// be one `ninfer: error:` line with a non-zero exit.
#include "ChatCommand.h"

#include "TestModel.h"
#include "ninfer/ChatTemplate.h"
#include "ninfer/Executor.h"
#include "ninfer/Generator.h"
#include "ninfer/Plan.h"
#include "ninfer/Sampler.h"
#include "ninfer/Tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

namespace ninfer {
namespace {

using test::TinyModel;
using test::TinyModelSpec;

const char* const kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

// Ids: 0-25 a-z, 26-35 0-9, 36 space, 37 newline, 38 <|im_start|>, 39 <|im_end|>, 40 <s>.
TinyModel chatModel(const std::string& chatTemplate, bool withEos = false) {
  TinyModelSpec spec;
  spec.vocab = 41;
  spec.context = 160;
  spec.maxStepTokens = 16;
  TinyModel model = test::buildTinyModel(spec);
  plan::TokenizerT& tok = *model.maker.plan.tokenizer;
  tok.kind = plan::TokenizerKind::ByteLevelBpe;
  tok.pretokenizer = "gpt2";
  tok.tokens.clear();
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz0123456789"))
    tok.tokens.push_back(std::string(1, c));
  tok.tokens.push_back("\xC4\xA0"); // byte-level space
  tok.tokens.push_back("\xC4\x8A"); // byte-level newline
  tok.tokens.push_back("<|im_start|>");
  tok.tokens.push_back("<|im_end|>");
  tok.tokens.push_back("<s>");
  tok.special_ids = {38, 39, 40};
  tok.bos_id = 40;
  tok.add_bos = false;
  tok.eos_ids.clear();
  if (withEos)
    tok.eos_ids = {39};
  tok.chat_template = chatTemplate;
  return model;
}

struct CommandResult {
  int exitCode;
  std::string out;
  std::string err;
};

std::string readBack(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0)
    text.append(chunk, n);
  return text;
}

CommandResult runChat(std::vector<std::string> args, const std::string& input) {
  std::FILE* in = std::tmpfile();
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  std::fwrite(input.data(), 1, input.size(), in);
  std::fflush(in);
  std::rewind(in);
  args.insert(args.begin(), {"ninfer", "chat"});
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  const int code = runChatCommand(int(argv.size()), argv.data(), ChatStreams{in, out, err, false});
  CommandResult r{code, readBack(out), readBack(err)};
  std::fclose(in);
  std::fclose(out);
  std::fclose(err);
  return r;
}

CommandResult runTokenize(std::vector<std::string> args) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  args.insert(args.begin(), {"ninfer", "tokenize"});
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  const int code = runTokenizeCommand(int(argv.size()), argv.data(), out, err);
  CommandResult r{code, readBack(out), readBack(err)};
  std::fclose(out);
  std::fclose(err);
  return r;
}

void expectOneErrorLine(const CommandResult& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, code) << r.err;
  EXPECT_EQ(r.err.rfind("ninfer: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// What the chat command must answer: the Generator on the rendered conversation.
std::string referenceAnswer(const PlanFile& plan, const std::vector<ChatMessage>& history,
                            int maxNewTokens) {
  Result<ChatTemplate> tmpl = ChatTemplate::parse(kChatMl);
  EXPECT_TRUE(tmpl.isOk());
  Result<std::string> text = tmpl->render(history, {});
  EXPECT_TRUE(text.isOk()) << text.status().message();
  auto tokenizer = Tokenizer::fromPlan(plan.plan().tokenizer());
  EXPECT_TRUE(tokenizer.isOk());
  Result<std::vector<int32_t>> ids = encodeChatPrompt(plan, *tokenizer.value(), text.value());
  EXPECT_TRUE(ids.isOk());
  auto executor = createCpuExecutor(plan, 1);
  EXPECT_TRUE(executor.isOk());
  GenerationConfig config = GenerationConfig::fromPlan(plan);
  config.maxNewTokens = maxNewTokens;
  config.eosIds = chatStopIds(plan);
  Generator generator(*executor.value(), config);
  Sampler sampler(SamplingParams{});
  StreamDecoder decoder(*tokenizer.value());
  std::string answer;
  auto stats = generator.generate(ids.value(), sampler, [&](int32_t id) {
    answer += decoder.push(id);
    return true;
  });
  EXPECT_TRUE(stats.isOk());
  return answer + decoder.finish();
}

TEST(ChatCommand, AnswersCarryHistoryAndResetClearsIt) {
  TinyModel model = chatModel(kChatMl);
  const std::string path = model.maker.write("chat_history.nplan");
  auto plan = PlanFile::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();

  CommandResult r =
      runChat({path, "-n", "12", "--device", "cpu", "--threads", "1", "--system", "be brief"},
              "hello there\n\n  \nand now\n/reset\nabc\n/exit\nnot read\n");
  ASSERT_EQ(r.exitCode, 0) << r.err;

  std::vector<ChatMessage> history = {{"system", "be brief"}, {"user", "hello there"}};
  const std::string first = referenceAnswer(*plan.value(), history, 12);
  history.push_back({"assistant", first});
  history.push_back({"user", "and now"});
  const std::string second = referenceAnswer(*plan.value(), history, 12);
  const std::string third =
      referenceAnswer(*plan.value(), {{"system", "be brief"}, {"user", "abc"}}, 12);
  EXPECT_EQ(r.out, first + "\n" + second + "\n" + third + "\n");
  EXPECT_NE(second, third); // the history changed the second answer's prompt
  EXPECT_NE(r.err.find("(conversation cleared)"), std::string::npos) << r.err;
}

TEST(ChatCommand, EndOfInputEndsTheSession) {
  TinyModel model = chatModel(kChatMl);
  const std::string path = model.maker.write("chat_eof.nplan");
  CommandResult r = runChat({path, "-n", "3", "--device", "cpu"}, "abc");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST(ChatCommand, StopIdsIncludeTheTemplatesEndOfTurnToken) {
  TinyModel model = chatModel(kChatMl);
  auto plan = PlanFile::open(model.maker.write("chat_stop.nplan"));
  ASSERT_TRUE(plan.isOk());
  EXPECT_EQ(chatStopIds(*plan.value()), (std::vector<int32_t>{39}));
  TinyModel withEos = chatModel(kChatMl, /*withEos=*/true);
  auto plan2 = PlanFile::open(withEos.maker.write("chat_stop2.nplan"));
  ASSERT_TRUE(plan2.isOk());
  EXPECT_EQ(chatStopIds(*plan2.value()), (std::vector<int32_t>{39})); // not twice
}

TEST(ChatCommand, RenderAndEncodeOneShotPrompt) {
  TinyModel model = chatModel("{{ bos_token }}" + std::string(kChatMl));
  model.maker.plan.tokenizer->bos_text = "<s>";
  model.maker.plan.tokenizer->add_bos = true;
  auto plan = PlanFile::open(model.maker.write("chat_oneshot.nplan"));
  ASSERT_TRUE(plan.isOk());
  Result<std::string> text = renderChatPrompt(*plan.value(), "sys", "hi");
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_EQ(text.value(), "<s><|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                          "<|im_start|>assistant\n");
  auto tokenizer = Tokenizer::fromPlan(plan.value()->plan().tokenizer());
  ASSERT_TRUE(tokenizer.isOk());
  // The template writes BOS, so the tokenizer must not add a second one.
  Result<std::vector<int32_t>> ids =
      encodeChatPrompt(*plan.value(), *tokenizer.value(), text.value());
  ASSERT_TRUE(ids.isOk());
  ASSERT_GE(ids.value().size(), 3u);
  EXPECT_EQ(ids.value()[0], 40);
  EXPECT_EQ(ids.value()[1], 38);
  // Without BOS in the text the tokenizer's own rule adds it; a doubled one is reduced.
  ids = encodeChatPrompt(*plan.value(), *tokenizer.value(), "abc");
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{40, 0, 1, 2}));
  ids = encodeChatPrompt(*plan.value(), *tokenizer.value(), "<s><s>abc");
  ASSERT_TRUE(ids.isOk());
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{40, 0, 1, 2}));
  // Without a system message there is no system turn.
  text = renderChatPrompt(*plan.value(), "", "hi");
  ASSERT_TRUE(text.isOk());
  EXPECT_EQ(text.value(), "<s><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatCommand, PlanWithoutChatTemplateIsAClearError) {
  TinyModel model = chatModel("");
  const std::string path = model.maker.write("chat_none.nplan");
  expectOneErrorLine(runChat({path, "--device", "cpu"}, "hi\n"), 1, "carries no chat template");
  auto plan = PlanFile::open(path);
  ASSERT_TRUE(plan.isOk());
  Result<std::string> text = renderChatPrompt(*plan.value(), "", "hi");
  ASSERT_FALSE(text.isOk());
  EXPECT_NE(text.status().message().find("carries no chat template"), std::string::npos);
}

TEST(ChatCommand, TemplateRefusingASystemMessageIsReportedAtStart) {
  TinyModel model = chatModel("{% if messages[0].role == 'system' %}{{ raise_exception('System "
                              "role not supported') }}{% endif %}" +
                              std::string(kChatMl));
  const std::string path = model.maker.write("chat_nosys.nplan");
  expectOneErrorLine(runChat({path, "--device", "cpu", "--system", "x"}, "hi\n"), 1,
                     "does not accept a system message: chat template raised an error at line 1: "
                     "System role not supported");
  EXPECT_EQ(runChat({path, "--device", "cpu", "-n", "2"}, "hi\n").exitCode, 0);
}

TEST(ChatCommand, TemplateErrorsDuringATurnKeepTheSession) {
  // Refuses a second user turn in a row; the session reports it and goes on.
  TinyModel model = chatModel("{% if messages|length > 1 %}{{ raise_exception('one turn only') }}"
                              "{% endif %}" +
                              std::string(kChatMl));
  const std::string path = model.maker.write("chat_turn_error.nplan");
  CommandResult r = runChat({path, "--device", "cpu", "-n", "2"}, "hi\nagain\n");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("ninfer: error: chat template raised an error at line 1: one turn only"),
            std::string::npos)
      << r.err;
}

TEST(ChatCommand, LongConversationsDropTheOldestTurns) {
  TinyModel model = chatModel(kChatMl);
  const std::string path = model.maker.write("chat_long.nplan");
  std::string input;
  for (int i = 0; i < 8; ++i)
    input += "abcdefghijklmnopqrstuvwxyz abcdefghij\n";
  CommandResult r = runChat({path, "--device", "cpu", "-n", "4"}, input);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("oldest turns dropped"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 8);
  // One message longer than the context: an error for that turn only.
  r = runChat({path, "--device", "cpu", "-n", "4"}, std::string(400, 'a') + "\nabc\n");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("more than the plan's context of 160"), std::string::npos) << r.err;
}

TEST(ChatCommand, UsageErrors) {
  expectOneErrorLine(runChat({}, ""), 2, "chat needs a plan");
  expectOneErrorLine(runChat({"x.nplan", "--frob"}, ""), 2, "unknown option '--frob'");
  expectOneErrorLine(runChat({"x.nplan", "-n"}, ""), 2, "-n needs a value");
  expectOneErrorLine(runChat({"x.nplan", "-n", "0"}, ""), 2, "-n expects an integer");
  expectOneErrorLine(runChat({"x.nplan", "--temp", "abc"}, ""), 2, "--temp expects a number");
  expectOneErrorLine(runChat({"x.nplan", "--device", "tpu"}, ""), 2, "--device expects");
  expectOneErrorLine(runChat({"missing.nplan"}, ""), 1, "missing.nplan");
  CommandResult help = runChat({"--help"}, "");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("usage: ninfer chat PLAN"), std::string::npos);
}

TEST(TokenizeCommand, IdsAndPieces) {
  TinyModel model = chatModel(kChatMl);
  model.maker.plan.tokenizer->add_bos = true;
  const std::string path = model.maker.write("tokenize.nplan");
  CommandResult r = runTokenize({path, "ab c\n"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "40,0,1,36,2,37\n");
  r = runTokenize({path, "ab c\n", "--no-bos"});
  EXPECT_EQ(r.out, "0,1,36,2,37\n");
  r = runTokenize({path, "<|im_start|>a\n", "--no-bos", "--pieces"});
  EXPECT_EQ(r.out, "38\t<|im_start|>\n0\ta\n37\t\\n\n");
  expectOneErrorLine(runTokenize({path}), 2, "usage: ninfer tokenize");
  expectOneErrorLine(runTokenize({path, "a", "--bogus"}), 2, "unknown option '--bogus'");
  expectOneErrorLine(runTokenize({"missing.nplan", "a"}), 1, "missing.nplan");
}

} // namespace
} // namespace ninfer
