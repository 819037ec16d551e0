// Byte-identical rendering against transformers: every case of
// chat_goldens.jsonl (written by make_goldens.py) is one test. A case renders a
// real chat template (templates/*.jinja) with a conversation, or a small
// snippet with variables; where the reference raised, ninfer must fail too, and
// for raise_exception with the same message.
#include "ninfer/ChatTemplate.h"

#include "ChatTemplateValue.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer {
namespace {

using jinja::Value;

const std::string kTestDir = NINFER_CHAT_TEST_DIR;

struct GoldenCase {
  std::string name;
  std::string kind; // chat | snippet
  std::string source;
  std::string messagesJson = "[]";
  ChatRenderOptions options;
  bool expectError = false;
  std::string expected; // the text, or the reference's error message
  std::string loadError;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string stringField(const Value& record, const char* key) {
  const Value* v = record.asDict().find(key);
  return v && v->isString() ? v->asString() : std::string();
}

std::optional<std::string> optionalString(const Value& record, const char* key) {
  const Value* v = record.asDict().find(key);
  if (!v || !v->isString())
    return std::nullopt;
  return v->asString();
}

std::vector<GoldenCase> loadGoldens() {
  std::vector<GoldenCase> cases;
  std::ifstream in(kTestDir + "/chat_goldens.jsonl", std::ios::binary);
  if (!in) {
    GoldenCase broken;
    broken.name = "missing_golden_file";
    broken.loadError = "cannot read " + kTestDir + "/chat_goldens.jsonl";
    return {broken};
  }
  std::string line;
  while (std::getline(in, line)) {
    GoldenCase c;
    try {
      const Value record = jinja::parseJson(line);
      const std::string kind = stringField(record, "kind");
      if (kind == "meta")
        continue;
      c.kind = kind;
      c.name = kind + "/" + stringField(record, "name");
      const jinja::JsonOptions compact;
      if (kind == "chat") {
        c.source = readFile(kTestDir + "/templates/" + stringField(record, "template") + ".jinja");
        c.messagesJson = jinja::toJson(*record.asDict().find("messages"), compact);
        const Value* gen = record.asDict().find("add_generation_prompt");
        c.options.addGenerationPrompt = gen && jinja::truthy(*gen);
        c.options.bosToken = optionalString(record, "bos_token");
        c.options.eosToken = optionalString(record, "eos_token");
        c.options.extraVariablesJson = jinja::toJson(*record.asDict().find("extra"), compact);
      } else {
        c.source = stringField(record, "source");
        // Snippets see what ninfer passes by default, plus their variables
        // (which may replace `messages`).
        c.options.extraVariablesJson = jinja::toJson(*record.asDict().find("vars"), compact);
      }
      if (const Value* error = record.asDict().find("error")) {
        c.expectError = true;
        c.expected = error->asString();
      } else {
        c.expected = stringField(record, "expected");
      }
    } catch (const jinja::TemplateError& e) {
      c.name = "unreadable_line_" + std::to_string(cases.size());
      c.loadError = e.message;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

class ChatGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ChatGolden, MatchesTransformers) {
  const GoldenCase& c = GetParam();
  ASSERT_TRUE(c.loadError.empty()) << c.loadError;
  Result<ChatTemplate> tmpl = ChatTemplate::parse(c.source);
  if (!tmpl.isOk()) {
    EXPECT_TRUE(c.expectError) << "parse failed: " << tmpl.status().message();
    return;
  }
  Result<std::string> text = tmpl->renderJson(c.messagesJson, c.options);
  if (c.expectError) {
    ASSERT_FALSE(text.isOk()) << "the reference failed with '" << c.expected
                              << "' but ninfer rendered:\n"
                              << text.value();
    // raise_exception keeps the template's own message.
    const bool raised = c.expected.find("Error: ") == std::string::npos ||
                        c.expected.rfind("TemplateError: ", 0) == 0;
    if (raised) {
      std::string message = c.expected;
      if (message.rfind("TemplateError: ", 0) == 0)
        message = message.substr(15);
      EXPECT_NE(text.status().message().find("raised an error"), std::string::npos)
          << text.status().message();
      EXPECT_NE(text.status().message().find(message), std::string::npos)
          << text.status().message();
    }
    return;
  }
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_EQ(text.value(), c.expected);
}

std::string caseName(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name;
  for (char ch : info.param.name)
    name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Goldens, ChatGolden, ::testing::ValuesIn(loadGoldens()), caseName);

// The golden set must cover each family the chat command targets.
TEST(ChatGoldenFile, CoversTheTemplateFamilies) {
  const std::vector<GoldenCase> cases = loadGoldens();
  ASSERT_GT(cases.size(), 200u);
  // (family, whether some case must raise: bad role order or a system role)
  const std::pair<const char*, bool> families[] = {
      {"qwen2_5/", false},     {"qwen3/", false},           {"llama3/", false},
      {"llama3_1/", true},     {"llama2/", true},           {"mistral/", true},
      {"gemma/", true},        {"gemma3/", true},           {"phi3/", false},
      {"deepseek_r1/", false}, {"mistral_v3_tools/", true}, {"hermes_tools/", false}};
  for (const auto& [family, mustRaise] : families) {
    int rendered = 0, raised = 0;
    for (const GoldenCase& c : cases) {
      if (c.name.rfind(std::string("chat/") + family, 0) != 0)
        continue;
      if (c.expectError)
        ++raised;
      else
        ++rendered;
    }
    EXPECT_GE(rendered, 8) << family;
    if (mustRaise) {
      EXPECT_GE(raised, 1) << family;
    }
  }
}

} // namespace
} // namespace ninfer
