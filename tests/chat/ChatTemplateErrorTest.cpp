// What the goldens cannot show: constructs ninfer refuses (at parse time, with
// the construct and line named), raise_exception, runaway templates, malformed
// input that must end in an error rather than a crash, and the API's options.
#include "ninfer/ChatTemplate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

namespace ninfer {
namespace {

const std::string kTestDir = NINFER_CHAT_TEST_DIR;

std::string parseError(const std::string& source) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  return t.isOk() ? std::string("(parsed)") : t.status().message();
}

Result<std::string> renderSource(const std::string& source, const std::string& extra = "",
                                 std::vector<ChatMessage> messages = {{"user", "hi"}}) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  if (!t.isOk())
    return t.status();
  ChatRenderOptions options;
  options.extraVariablesJson = extra;
  return t->render(messages, options);
}

std::string renderError(const std::string& source, const std::string& extra = "") {
  Result<std::string> r = renderSource(source, extra);
  return r.isOk() ? "(rendered: " + r.value() + ")" : r.status().message();
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

TEST(ChatTemplateParse, UnsupportedFilterIsNamedWithItsLine) {
  const std::string message = parseError("a\n\n{{ x | wordwrap(10) }}");
  EXPECT_CONTAINS(message, "line 3");
  EXPECT_CONTAINS(message, "filter 'wordwrap' is not supported");
}

TEST(ChatTemplateParse, UnknownFilterAndTest) {
  EXPECT_CONTAINS(parseError("{{ x|bogus }}"), "unknown filter 'bogus'");
  EXPECT_CONTAINS(parseError("{% if x is frobbed %}{% endif %}"), "unknown test 'frobbed'");
  EXPECT_CONTAINS(parseError("{% if x is escaped %}{% endif %}"),
                  "test 'escaped' is not supported");
}

TEST(ChatTemplateParse, UnsupportedTagsAreNamed) {
  EXPECT_CONTAINS(parseError("{% include 'other.jinja' %}"), "'include' tag is not supported");
  EXPECT_CONTAINS(parseError("{% call m() %}x{% endcall %}"), "'call' tag is not supported");
  EXPECT_CONTAINS(parseError("{% filter upper %}x{% endfilter %}"),
                  "'filter' tag is not supported");
  EXPECT_CONTAINS(parseError("{% extends 'base' %}"), "'extends' tag is not supported");
  EXPECT_CONTAINS(parseError("x\n{% frobnicate %}"), "line 2: unknown tag 'frobnicate'");
}

TEST(ChatTemplateParse, UnsupportedExpressionsAreNamed) {
  EXPECT_CONTAINS(parseError("{% for x in xs recursive %}{% endfor %}"), "recursive for loops");
  EXPECT_CONTAINS(parseError("{{ f(*args) }}"), "'*' arguments");
  EXPECT_CONTAINS(parseError("{{ '{}'.format(1) }}"), "method 'format()' is not supported");
  EXPECT_CONTAINS(parseError("{{ lipsum() }}"), "function 'lipsum' is not supported");
  EXPECT_CONTAINS(parseError("{{ xs.append(1) }}"), "method 'append()' is not supported");
}

TEST(ChatTemplateParse, SyntaxErrors) {
  EXPECT_CONTAINS(parseError("{% if x %}never closed"), "unexpected end of template");
  EXPECT_CONTAINS(parseError("{% if x %}{% endfor %}"), "unexpected 'endfor'");
  EXPECT_CONTAINS(parseError("{{ 'open string }}"), "unterminated string");
  EXPECT_CONTAINS(parseError("{# open comment"), "missing end of comment");
  EXPECT_CONTAINS(parseError("{% break %}"), "'break' outside of a loop");
  EXPECT_CONTAINS(parseError("{{ (1 }}"), "expected ')'");
  EXPECT_CONTAINS(parseError("{% set 1 = 2 %}"), "can't assign");
  EXPECT_CONTAINS(parseError("{{ x ? y }}"), "unexpected character '?'");
  EXPECT_CONTAINS(parseError(std::string("{{ '\xff' }}")), "not valid UTF-8");
}

TEST(ChatTemplateParse, DeepNestingIsAnErrorNotAStackOverflow) {
  EXPECT_CONTAINS(
      parseError("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
      "nested too deeply");
  EXPECT_CONTAINS(parseError("{{ " + std::string(100000, '-') + "1 }}"), "nested too deeply");
  EXPECT_CONTAINS(parseError("{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}"),
                  "nested too deeply");
  EXPECT_CONTAINS(parseError("{{ " + std::string(50000, '[') + " }}"), "unexpected '}'");
}

TEST(ChatTemplateRender, RaiseExceptionGivesTheMessageAndLine) {
  const std::string message =
      renderError("line one\n{% if messages[0].role == 'user' %}{{ raise_exception('No users "
                  "allowed: ' ~ messages[0].content) }}{% endif %}");
  EXPECT_CONTAINS(message, "chat template raised an error at line 2: No users allowed: hi");
}

TEST(ChatTemplateRender, RuntimeErrorsNameTheLine) {
  EXPECT_CONTAINS(renderError("\n\n{{ undefined_thing.attr }}"),
                  "line 3: 'undefined_thing' is undefined");
  EXPECT_CONTAINS(renderError("{{ 'a' % 1 }}"), "printf-style string formatting");
  EXPECT_CONTAINS(renderError("{{ {1: 2} }}"), "dict keys other than strings");
  EXPECT_CONTAINS(renderError("{{ x.upper() }}", R"({"x": 3})"), "has no method 'upper'");
  EXPECT_CONTAINS(renderError("{% set ns = 3 %}{% set ns.a = 1 %}"), "non-namespace");
  EXPECT_CONTAINS(renderError("{% for a, b in [1] %}{% endfor %}"), "cannot unpack");
  EXPECT_CONTAINS(renderError("{{ 9223372036854775807 + 1 }}"), "integer overflow");
}

TEST(ChatTemplateRender, RunawayTemplatesStop) {
  EXPECT_CONTAINS(renderError("{{ range(100001)|length }}"), "range() is too long");
  EXPECT_CONTAINS(renderError("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"),
                  "nested deeper than");
  EXPECT_CONTAINS(renderError("{{ 'x' * 1000000000 }}"), "too large");
  EXPECT_CONTAINS(renderError("{% for i in range(100000) %}{% for j in range(100000) %}"
                              "{% endfor %}{% endfor %}"),
                  "runs too long");
  EXPECT_CONTAINS(renderError("{% set s = 'xxxxxxxxxxxxxxxx' * 65536 %}{% for i in range(100) %}"
                              "{{ s }}{% endfor %}"),
                  "larger than");
}

TEST(ChatTemplateRender, MessagesBosEosAndExtras) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{{ bos_token is defined }}|{{ bos_token }}|{{ eos_token }}|{% for m in messages %}"
      "{{ m.role }}:{{ m.content }};{% endfor %}|{{ add_generation_prompt }}|{{ date_string }}");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  ChatRenderOptions options;
  options.addGenerationPrompt = false;
  Result<std::string> r = t->render({{"system", "S"}, {"user", "U"}}, options);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r.value(), "False|||system:S;user:U;|False|");
  options.bosToken = "<s>";
  options.eosToken = "</s>";
  options.addGenerationPrompt = true;
  options.extraVariablesJson = R"({"date_string": "01 Jan 2025"})";
  r = t->render({{"user", "U"}}, options);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r.value(), "True|<s>|</s>|user:U;|True|01 Jan 2025");
}

TEST(ChatTemplateRender, BadInputsAreErrors) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ messages }}");
  ASSERT_TRUE(t.isOk());
  EXPECT_FALSE(t->render({{"user", "\xc3("}}, {}).isOk());
  ChatRenderOptions options;
  options.extraVariablesJson = "[1, 2]";
  EXPECT_CONTAINS(t->render({{"user", "x"}}, options).status().message(), "JSON object");
  options.extraVariablesJson = "{\"a\": ";
  EXPECT_CONTAINS(t->render({{"user", "x"}}, options).status().message(), "invalid JSON");
  EXPECT_CONTAINS(t->renderJson("{}", {}).status().message(), "JSON array");
  EXPECT_CONTAINS(t->renderJson("[{\"role\": tru}]", {}).status().message(), "invalid JSON");
}

TEST(ChatTemplateRender, StrftimeNowUsesTheLocalDate) {
  Result<std::string> r = renderSource("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  char expected[64];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(expected, sizeof(expected), "%d %b %Y", &local);
  EXPECT_EQ(r.value(), expected);
}

// Mutated real templates: every outcome is a result or an error, never a crash.
TEST(ChatTemplateRobustness, MutatedTemplatesNeverCrash) {
  std::vector<std::string> sources;
  for (const char* name : {"qwen3", "llama3_1", "gemma3", "mistral"}) {
    std::ifstream in(kTestDir + "/templates/" + name + ".jinja", std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    ASSERT_FALSE(os.str().empty()) << name;
    sources.push_back(os.str());
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "{}%#-+()[]'\"|.,:=~!<>*/ \n\\abcxyz019_";
  int parsed = 0;
  for (int i = 0; i < 600; ++i) {
    std::string s = sources[size_t(i) % sources.size()];
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t pos = rng() % s.size();
      switch (rng() % 3) {
      case 0:
        s[pos] = alphabet[rng() % alphabet.size()];
        break;
      case 1:
        s.erase(pos, 1 + rng() % 8);
        break;
      default:
        s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    Result<ChatTemplate> t = ChatTemplate::parse(s);
    if (!t.isOk()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++parsed;
    ChatRenderOptions options;
    options.bosToken = "<s>";
    options.extraVariablesJson = R"({"tools": [{"type": "function", "function": {"name": "f"}}]})";
    (void)t->render({{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "v"}}, options);
  }
  EXPECT_GT(parsed, 10); // some mutations survive parsing and get rendered
}

TEST(ChatTemplateRobustness, RandomBytesNeverCrash) {
  std::mt19937 rng(99);
  for (int i = 0; i < 300; ++i) {
    std::string s(size_t(rng() % 64), ' ');
    for (char& c : s)
      c = "{}%#-+()[]'\"|.,:=~ \nabif01"[rng() % 26];
    Result<ChatTemplate> t = ChatTemplate::parse(s);
    if (t.isOk())
      (void)t->render({{"user", "u"}}, {});
  }
}

} // namespace
} // namespace ninfer

namespace ninfer {
namespace {

// A long conversation renders in well under a second (the chat command
// renders the whole history every turn).
TEST(ChatTemplatePerformance, LongConversationRendersQuickly) {
  std::ifstream in(kTestDir + "/templates/qwen3.jinja", std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  Result<ChatTemplate> t = ChatTemplate::parse(os.str());
  ASSERT_TRUE(t.isOk()) << t.status().message();
  std::vector<ChatMessage> messages = {{"system", "You are helpful."}};
  for (int i = 0; i < 1000; ++i) {
    messages.push_back({"user", "Question number " + std::to_string(i) + std::string(200, 'q')});
    messages.push_back({"assistant", "<think>\nhmm\n</think>\n\nAnswer " + std::string(300, 'a')});
  }
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> text = t->render(messages, {});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_GT(text.value().size(), 500000u);
  EXPECT_LT(seconds, 2.0);
  std::printf("2001 messages rendered in %.1f ms\n", seconds * 1000);
}

} // namespace
} // namespace ninfer
