// compiler/ChatTemplateImport.cpp: where the template is read from, the
// bos/eos texts, the end-of-turn ids, and the refusal of templates the
// runtime cannot run.
#include "ChatTemplateImport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fstream>

namespace ninfer {
namespace {

class ChatTemplateImportTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ninfer-chat-import", path));
    dir_ = std::string(path);
    // A small vocabulary with the special tokens of several chat formats.
    for (const char* token : {"a", "b", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>",
                              "</s>", "<|eot_id|>", "<end_of_turn>"})
      table_.tokens.push_back(token);
    table_.special_ids = {2, 3, 4, 5, 6, 7, 8};
    table_.eos_ids = {4};
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream out(dir_ + "/" + name, std::ios::binary);
    out << text;
  }

  std::string importError() {
    llvm::Error error = importChatTemplate(dir_, table_);
    return error ? llvm::toString(std::move(error)) : std::string();
  }

  std::string dir_;
  plan::TokenizerT table_;
};

TEST_F(ChatTemplateImportTest, StringTemplateWithSpecialTokenObjects) {
  write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false},
    "eos_token": "<|im_end|>",
    "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
  })");
  EXPECT_EQ(importError(), "");
  EXPECT_NE(table_.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(table_.bos_text, "<s>");
  EXPECT_EQ(table_.eos_text, "<|im_end|>");
  // <|im_end|> ends a turn in this template; <|endoftext|> (4) stays.
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4, 3}));
}

TEST_F(ChatTemplateImportTest, EndOfTurnTokensOnlyWhenTheTemplateUsesThem) {
  write("tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}<|eot_id|>"})");
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4, 7})); // not <|im_end|>, <end_of_turn>
  EXPECT_EQ(table_.bos_text, "");
}

TEST_F(ChatTemplateImportTest, EosTokenVariableAddsTheEosId) {
  write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>",
    "chat_template": "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{{ eos_token }}{% endfor %}"})");
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4, 6}));
  // Importing twice does not duplicate ids.
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4, 6}));
}

TEST_F(ChatTemplateImportTest, NamedTemplateListUsesDefault) {
  write("tokenizer_config.json", R"({"chat_template": [
    {"name": "tool_use", "template": "TOOLS"},
    {"name": "default", "template": "DEFAULT<end_of_turn>"}]})");
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.chat_template, "DEFAULT<end_of_turn>");
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4, 8}));
}

TEST_F(ChatTemplateImportTest, NamedTemplateListWithoutDefaultIsAnError) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  const std::string error = importError();
  EXPECT_NE(error.find("'rag'"), std::string::npos) << error;
  EXPECT_NE(error.find("none named 'default'"), std::string::npos) << error;
}

TEST_F(ChatTemplateImportTest, JinjaFileWinsOverTokenizerConfig) {
  write("tokenizer_config.json", R"({"eos_token": "</s>", "chat_template": "FROM CONFIG"})");
  write("chat_template.jinja", "FROM FILE {{ messages|length }}\n");
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.chat_template, "FROM FILE {{ messages|length }}\n");
  EXPECT_EQ(table_.eos_text, "</s>");
}

TEST_F(ChatTemplateImportTest, ConfigJsonPathIsAccepted) {
  write("chat_template.jinja", "x");
  EXPECT_FALSE(importChatTemplate(dir_ + "/config.json", table_));
  EXPECT_EQ(table_.chat_template, "x");
}

TEST_F(ChatTemplateImportTest, NoTemplateIsNotAnError) {
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(importError(), "");
  EXPECT_EQ(table_.chat_template, "");
  EXPECT_EQ(table_.bos_text, ""); // nothing is filled without a template
  EXPECT_EQ(table_.eos_ids, (std::vector<int>{4}));
}

TEST_F(ChatTemplateImportTest, NoTokenizerConfigIsNotAnError) { EXPECT_EQ(importError(), ""); }

TEST_F(ChatTemplateImportTest, UnsupportedConstructNamesFileLineAndConstruct) {
  write("chat_template.jinja", "{{ bos_token }}\n{{ messages | wordwrap }}");
  const std::string error = importError();
  EXPECT_NE(error.find("chat_template.jinja"), std::string::npos) << error;
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_NE(error.find("'wordwrap'"), std::string::npos) << error;
  EXPECT_EQ(table_.chat_template, "");
}

TEST_F(ChatTemplateImportTest, TemplateThatFailsToRenderIsRefused) {
  write("tokenizer_config.json", R"({"chat_template": "{{ '%s' % messages[0].content }}"})");
  const std::string error = importError();
  EXPECT_NE(error.find("tokenizer_config.json chat_template"), std::string::npos) << error;
  EXPECT_NE(error.find("printf-style"), std::string::npos) << error;
}

TEST_F(ChatTemplateImportTest, TemplateThatRaisesOnPurposeIsAccepted) {
  // Gemma-style: refuses a system role, renders a user turn.
  write(
      "tokenizer_config.json",
      R"({"chat_template": "{% if messages[0].role != 'system' %}{{ raise_exception('needs a system prompt') }}{% endif %}"})");
  EXPECT_EQ(importError(), "");
  EXPECT_FALSE(table_.chat_template.empty());
}

TEST_F(ChatTemplateImportTest, MalformedConfigIsAnError) {
  write("tokenizer_config.json", R"({"chat_template": 42})");
  EXPECT_NE(importError().find("neither a string nor a list"), std::string::npos);
  write("tokenizer_config.json", "{not json");
  EXPECT_NE(importError().find("invalid JSON"), std::string::npos);
}

} // namespace
} // namespace ninfer
