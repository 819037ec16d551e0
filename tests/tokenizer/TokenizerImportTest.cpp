// compiler/TokenizerImport.cpp on variations of the pycode tokenizer.json:
// both merge spellings, BOS rules, the Llama 3 style Split pre-tokenizer, a
// directory without tokenizer files, and one clear error per unsupported part;
// then the SentencePiece-style tokenizer.json and tokenizer.model directories.
#include "TokenizerImport.h"
#include "TestSupport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <gtest/gtest.h>

namespace ninfer {
namespace {

namespace json = llvm::json;

class TokenizerImport : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ninfer-tokenizer-test", dir));
    dir_ = std::string(dir);
    config_.vocabSize = 4096;
    config_.bosId = 0;
    config_.eosIds = {1, 7};
  }
  void TearDown() override {
    for (const char* name :
         {"tokenizer.json", "tokenizer_config.json", "config.json", "tokenizer.model"})
      llvm::sys::fs::remove(path(name));
    llvm::sys::fs::remove(dir_);
  }

  std::string path(const char* name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  void write(const char* name, const json::Value& value) {
    std::error_code ec;
    llvm::raw_fd_ostream out(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    out << value;
  }
  // Writes the pycode tokenizer.json (or `source`) after `edit` changed it.
  void writeTokenizer(
      const std::function<void(json::Object&)>& edit,
      const std::string& source = test::sharedPath("models/pycode-llama-3m/tokenizer.json")) {
    auto parsed = json::parse(test::readFile(source));
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    edit(*parsed->getAsObject());
    write("tokenizer.json", *parsed);
  }
  llvm::Expected<std::unique_ptr<plan::TokenizerT>> import() {
    return importTokenizer(dir_, config_);
  }
  void expectError(const std::string& fragment) {
    auto table = import();
    ASSERT_FALSE(bool(table)) << "import succeeded, expected: " << fragment;
    std::string message = llvm::toString(table.takeError());
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }

  std::string dir_;
  ModelConfig config_;
};

TEST_F(TokenizerImport, MergeSpellingsGiveTheSameTable) {
  writeTokenizer([](json::Object&) {});
  auto pairs = import();
  ASSERT_TRUE(bool(pairs)) << llvm::toString(pairs.takeError());
  writeTokenizer([](json::Object& root) {
    json::Array strings;
    for (const json::Value& pair : *root.getObject("model")->getArray("merges")) {
      const json::Array& p = *pair.getAsArray();
      strings.push_back((*p[0].getAsString() + " " + *p[1].getAsString()).str());
    }
    (*root.getObject("model"))["merges"] = std::move(strings);
  });
  auto strings = import();
  ASSERT_TRUE(bool(strings)) << llvm::toString(strings.takeError());
  EXPECT_EQ((*pairs)->merges, (*strings)->merges);
  EXPECT_EQ((*pairs)->merges.size(), 2u * 3838u);
  EXPECT_EQ((*pairs)->eos_ids, (std::vector<int32_t>{1, 7}));
}

TEST_F(TokenizerImport, DirectoryWithoutTokenizerKeepsBosAndEos) {
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->kind, plan::TokenizerKind::None);
  EXPECT_EQ((*table)->bos_id, 0);
  EXPECT_EQ((*table)->eos_ids, (std::vector<int32_t>{1, 7}));
  EXPECT_TRUE((*table)->tokens.empty());
}

TEST_F(TokenizerImport, NamesAMissingModelFolder) {
  const std::string missing = path("absent/model");
  auto table = importTokenizer(missing, config_);
  ASSERT_FALSE(bool(table));
  EXPECT_EQ(llvm::toString(table.takeError()), "no model folder at " + missing);
}

TEST_F(TokenizerImport, AcceptsAConfigJsonPath) {
  writeTokenizer([](json::Object&) {});
  auto table = importTokenizer(path("config.json"), config_);
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->kind, plan::TokenizerKind::ByteLevelBpe);
}

TEST_F(TokenizerImport, TokenizerConfigCanTurnBosOff) {
  writeTokenizer([](json::Object&) {});
  write("tokenizer_config.json", json::Object{{"add_bos_token", false}});
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_FALSE((*table)->add_bos);
  EXPECT_EQ((*table)->bos_id, 0);
}

TEST_F(TokenizerImport, BosFromTokenizerConfigWithoutTemplate) {
  writeTokenizer([](json::Object& root) { root["post_processor"] = nullptr; });
  write("tokenizer_config.json",
        json::Object{{"add_bos_token", true},
                     {"bos_token", json::Object{{"content", "<|end_of_text|>"}}}});
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_TRUE((*table)->add_bos);
  EXPECT_EQ((*table)->bos_id, 1);
}

TEST_F(TokenizerImport, RecognizesTheLlama3Split) {
  writeTokenizer([](json::Object& root) {
    const char* regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    root["pre_tokenizer"] = json::Object{
        {"type", "Sequence"},
        {"pretokenizers", json::Array{json::Object{{"type", "Split"},
                                                   {"pattern", json::Object{{"Regex", regex}}},
                                                   {"behavior", "Isolated"},
                                                   {"invert", false}},
                                      json::Object{{"type", "ByteLevel"},
                                                   {"add_prefix_space", false},
                                                   {"use_regex", false}}}}};
  });
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->pretokenizer, "llama3");
}

TEST_F(TokenizerImport, NamesUnsupportedParts) {
  writeTokenizer([](json::Object& root) { (*root.getObject("model"))["type"] = "Unigram"; });
  expectError("tokenizer.json model 'Unigram' is not supported yet");
  writeTokenizer([](json::Object& root) { root["normalizer"] = json::Object{{"type", "NFKC"}}; });
  expectError("normalizer 'NFKC' is not supported yet");
  writeTokenizer([](json::Object& root) {
    root["normalizer"] = json::Object{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}};
  });
  expectError("normalizer 'Prepend' is not supported yet");
  writeTokenizer([](json::Object& root) {
    root["pre_tokenizer"] = json::Object{{"type", "Metaspace"}};
  });
  expectError("pre_tokenizer 'Metaspace' is not supported yet");
  writeTokenizer([](json::Object& root) { root["decoder"] = json::Object{{"type", "WordPiece"}}; });
  expectError("decoder 'WordPiece' is not supported yet");
  writeTokenizer([](json::Object& root) {
    root["pre_tokenizer"] = json::Object{
        {"type", "Sequence"},
        {"pretokenizers", json::Array{json::Object{{"type", "Split"},
                                                   {"pattern", json::Object{{"Regex", "\\w+"}}},
                                                   {"behavior", "Isolated"}},
                                      json::Object{{"type", "ByteLevel"}, {"use_regex", false}}}}};
  });
  expectError("Split pattern '\\w+' is not supported yet");
  writeTokenizer([](json::Object& root) { (*root.getObject("model"))["byte_fallback"] = true; });
  expectError("byte_fallback needs the SentencePiece-style decoder");
  writeTokenizer([](json::Object& root) {
    root["normalizer"] = json::Object{{"type", "NFC"}};
    (*(*root.getArray("added_tokens"))[1].getAsObject())["normalized"] = true;
  });
  expectError("'<|end_of_text|>' is matched after normalization");
  writeTokenizer([](json::Object&) {});
  write("tokenizer_config.json", json::Object{{"add_eos_token", true}});
  expectError("add_eos_token is not supported yet");
  writeTokenizer([](json::Object& root) {
    (*(*root.getArray("added_tokens"))[1].getAsObject())["lstrip"] = true;
  });
  expectError("'<|end_of_text|>' uses lstrip");
}

TEST_F(TokenizerImport, RejectsBrokenVocabularies) {
  writeTokenizer(
      [](json::Object& root) { root.getObject("model")->getObject("vocab")->erase("!"); });
  expectError("no token with id 2 (ids must be dense)");
  writeTokenizer([](json::Object& root) {
    (*root.getObject("model")->getArray("merges"))[0] = json::Array{"Ġ", "nope"};
  });
  expectError("merge 0 uses 'nope'");
  config_.vocabSize = 1000;
  writeTokenizer([](json::Object&) {});
  expectError("4096 tokens but the model's vocab_size is 1000");
}

TEST_F(TokenizerImport, ReadsNfcAndIgnoreMerges) {
  writeTokenizer([](json::Object& root) {
    root["normalizer"] = json::Object{{"type", "Sequence"},
                                      {"normalizers", json::Array{json::Object{{"type", "NFC"}}}}};
    (*root.getObject("model"))["ignore_merges"] = true;
  });
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->normalizer, "nfc");
  EXPECT_TRUE((*table)->ignore_merges);
}

TEST_F(TokenizerImport, NamesUnsupportedSentencePieceStyleParts) {
  const std::string source = test::testDataPath("fixtures/sp_prepend/tokenizer.json");
  auto edit = [&](const std::function<void(json::Object&)>& f) { writeTokenizer(f, source); };
  edit([](json::Object&) {});
  {
    auto table = import();
    ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
    EXPECT_EQ((*table)->kind, plan::TokenizerKind::SentencePieceBpe);
    EXPECT_TRUE((*table)->add_dummy_prefix);
    EXPECT_EQ((*table)->unk_id, 0);
    EXPECT_EQ((*table)->bos_id, 1);
  }
  edit([](json::Object& root) { root["normalizer"] = json::Object{{"type", "Lowercase"}}; });
  expectError("normalizer 'Lowercase' is not supported yet");
  edit([](json::Object& root) { root["pre_tokenizer"] = json::Object{{"type", "Whitespace"}}; });
  expectError("pre_tokenizer 'Whitespace' is not supported yet with SentencePiece-style BPE");
  edit([](json::Object& root) {
    root["normalizer"] = nullptr;
    root["pre_tokenizer"] = json::Object{
        {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "sometimes"}};
  });
  expectError("Metaspace prepend_scheme 'sometimes' is unknown");
  edit([](json::Object& root) { root["normalizer"] = nullptr; });
  expectError("must turn spaces into");
  edit([](json::Object& root) { root.getObject("decoder")->getArray("decoders")->pop_back(); });
  expectError("decoder does not strip the");
  edit([](json::Object& root) {
    root.getObject("decoder")->getArray("decoders")->push_back(json::Object{{"type", "CTC"}});
  });
  expectError("decoder 'CTC' is not supported yet with SentencePiece-style BPE");
  edit([](json::Object& root) { (*root.getObject("model"))["byte_fallback"] = false; });
  expectError("SentencePiece-style BPE without byte_fallback is not supported yet");
  edit([](json::Object& root) {
    json::Object& vocab = *root.getObject("model")->getObject("vocab");
    vocab.erase("<0x41>");
    vocab["<0xZZ>"] = 3 + 0x41;
  });
  expectError("byte_fallback but no token <0x41>");
  edit([](json::Object& root) {
    (*(*root.getArray("added_tokens"))[1].getAsObject())["normalized"] = true;
  });
  expectError("'<s>' is matched after normalization");
}

TEST_F(TokenizerImport, ReadsATokenizerModelDirectory) {
  auto copy = [&](const std::string& from) {
    std::error_code ec = llvm::sys::fs::copy_file(from, path("tokenizer.model"));
    ASSERT_FALSE(ec) << ec.message();
  };
  copy(test::testDataPath("fixtures/sp_tiny/tokenizer.model"));
  auto table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->kind, plan::TokenizerKind::SentencePieceBpe);
  EXPECT_FALSE((*table)->scores.empty());
  EXPECT_TRUE((*table)->add_bos); // LlamaTokenizer's default
  EXPECT_EQ((*table)->bos_id, 0); // config.json's BOS wins
  EXPECT_EQ((*table)->eos_ids, (std::vector<int32_t>{1, 7}));

  write("tokenizer_config.json", json::Object{{"add_bos_token", false}});
  table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_FALSE((*table)->add_bos);

  write("tokenizer_config.json", json::Object{{"add_eos_token", true}});
  expectError("add_eos_token is not supported yet");
  llvm::sys::fs::remove(path("tokenizer_config.json"));

  config_.vocabSize = 100;
  expectError("tokenizer.model has 600 pieces but the model's vocab_size is 100");
  config_.vocabSize = 4096;

  // tokenizer.json, when present, is what transformers uses: it wins.
  writeTokenizer([](json::Object&) {});
  table = import();
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ((*table)->kind, plan::TokenizerKind::ByteLevelBpe);
  llvm::sys::fs::remove(path("tokenizer.json"));

  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path("tokenizer.model"), ec);
    out << "not a model";
  }
  expectError("is not a valid SentencePiece model");
}

} // namespace
} // namespace ninfer
