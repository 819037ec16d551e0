// GGUF reading: the parser against a file written by llama.cpp's gguf-py
// (make_gguf_fixtures.py), ggml's decodings against gguf-py's, the tokenizer of a
// file converted by llama.cpp (make_gguf_models.py) against the SentencePiece model
// it came from, and the errors of corrupt or unsupported files. The weights of those
// converted files are checked end to end by the golden test (run_golden.py --gguf).
#include "CompileDriver.h"
#include "GgufDequant.h"
#include "GgufFile.h"
#include "GgufImport.h"
#include "MappedFile.h"
#include "ModelConfig.h"
#include "SentencePieceModel.h"
#include "TestUtil.h"
#include "TokenizerImport.h"

#include "ninfer/HalfFloat.h"
#include "ninfer/QuantFormats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

namespace ninfer {
namespace {

using test::errorText;
using test::ScratchDir;

std::string referencePath() { return test::testDir() + "/fixtures/gguf/reference.gguf"; }
std::string goldenGguf(const std::string& name) {
  return test::testDir() + "/../golden/gguf/" + name;
}

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

llvm::Expected<GgufFile> parseBytes(const std::string& bytes) {
  return parseGguf("test.gguf", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(GgufFile, ReadsEveryValueTypeAsGgufPyWroteIt) {
  const std::string bytes = fileBytes(referencePath());
  ASSERT_FALSE(bytes.empty()) << referencePath();
  auto gguf = parseBytes(bytes);
  ASSERT_TRUE(bool(gguf)) << errorText(gguf);
  EXPECT_EQ(gguf->version, 3u);
  auto integer = [&](const char* key) {
    const GgufValue* v = gguf->find(key);
    EXPECT_TRUE(v && v->kind == GgufValue::Kind::Integer) << key;
    return v ? v->integer : 0;
  };
  EXPECT_EQ(integer("test.u8"), 200);
  EXPECT_EQ(integer("test.i8"), -100);
  EXPECT_EQ(integer("test.u16"), 60000);
  EXPECT_EQ(integer("test.i16"), -30000);
  EXPECT_EQ(integer("test.u32"), 4000000000ll);
  EXPECT_EQ(integer("test.i32"), -2000000000ll);
  EXPECT_EQ(integer("test.u64"), (int64_t(1) << 60) + 3);
  EXPECT_EQ(integer("test.i64"), -(int64_t(1) << 40));
  ASSERT_TRUE(gguf->find("test.f32") && gguf->find("test.f64") && gguf->find("test.bool"));
  EXPECT_EQ(gguf->find("test.f32")->kind, GgufValue::Kind::Float);
  EXPECT_EQ(gguf->find("test.f32")->number, 0.15625);
  EXPECT_EQ(gguf->find("test.f64")->number, 1e-300);
  EXPECT_EQ(gguf->find("test.bool")->kind, GgufValue::Kind::Bool);
  EXPECT_EQ(gguf->find("test.bool")->integer, 1);
  ASSERT_TRUE(gguf->find("test.string"));
  EXPECT_EQ(gguf->find("test.string")->text, "h\xC3\xA9llo");
  ASSERT_TRUE(gguf->find("test.int_array") && gguf->find("test.float_array") &&
              gguf->find("test.string_array") && gguf->find("test.nested"));
  EXPECT_EQ(gguf->find("test.int_array")->integers, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(gguf->find("test.float_array")->numbers, (std::vector<double>{0.5, -1.25}));
  EXPECT_EQ(gguf->find("test.string_array")->strings,
            (std::vector<std::string>{"a", "", "\xC3\xBC"}));
  EXPECT_EQ(gguf->find("test.nested")->kind, GgufValue::Kind::Other);
  EXPECT_EQ(gguf->find("general.architecture")->text, "test");
}

TEST(GgufFile, DecodesEveryTypeAsGgufPy) {
  const std::string bytes = fileBytes(referencePath());
  auto gguf = parseBytes(bytes);
  ASSERT_TRUE(bool(gguf)) << errorText(gguf);
  std::map<std::string, const GgufTensor*> byName;
  for (const GgufTensor& t : gguf->tensors)
    byName[t.name] = &t;
  int checked = 0;
  for (const char* type : {"F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                           "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}) {
    SCOPED_TRACE(type);
    const GgufTensor* coded = byName[type];
    const GgufTensor* ref = byName[std::string(type) + ".ref"];
    ASSERT_TRUE(coded && ref);
    EXPECT_STREQ(ggmlTypeTraits(coded->type).name, type);
    ASSERT_TRUE(canDequantizeGgml(coded->type));
    ASSERT_EQ(coded->dims, ref->dims);
    const int64_t values = ref->bytes / 4;
    std::vector<float> decoded(values), expected(values);
    const int64_t rows = coded->dims[1], perRow = coded->dims[0];
    for (int64_t r = 0; r < rows; ++r)
      dequantizeGgmlRow(coded->type, coded->data + r * (coded->bytes / rows),
                        decoded.data() + r * perRow, perRow);
    std::memcpy(expected.data(), ref->data, ref->bytes);
    // numpy may order a product's factors differently: one rounding of f32 apart at most.
    for (int64_t i = 0; i < values; ++i)
      ASSERT_NEAR(decoded[i], expected[i], 1e-6f * std::max(1.0f, std::fabs(expected[i])))
          << "value " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

TEST(GgufFile, EveryTruncationIsAnErrorThatSaysWhere) {
  const std::string bytes = fileBytes(referencePath());
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t length = 0; length < bytes.size(); length += 61) {
    auto gguf = parseBytes(bytes.substr(0, length));
    ASSERT_FALSE(bool(gguf)) << "length " << length;
    const std::string message = llvm::toString(gguf.takeError());
    EXPECT_EQ(message.rfind("test.gguf: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(GgufFile, RefusesWrongMagicVersionAndCounts) {
  const std::string good = fileBytes(referencePath());
  std::string notGguf = good;
  notGguf[0] = 'X';
  auto wrong = parseBytes(notGguf);
  EXPECT_NE(errorText(wrong).find("not a GGUF file"), std::string::npos);
  std::string v1 = good;
  v1[4] = 1;
  auto old = parseBytes(v1);
  EXPECT_NE(errorText(old).find("GGUF version 1 is not supported"), std::string::npos);
  std::string bigEndian = good;
  bigEndian[4] = 0;
  bigEndian[7] = 3;
  auto swapped = parseBytes(bigEndian);
  EXPECT_NE(errorText(swapped).find("a big-endian GGUF file"), std::string::npos);
  std::string huge = good;
  huge[8 + 7] = 0x7f; // tensor count ~ 2^63
  auto counted = parseBytes(huge);
  EXPECT_NE(errorText(counted).find("more than the file holds"), std::string::npos);
}

// A GGUF file made here, for the errors of files that parse but cannot be imported.
class GgufBuilder {
public:
  void string(const std::string& key, const std::string& value) {
    entry(key, 8);
    text(value);
  }
  void u32(const std::string& key, uint32_t value) {
    entry(key, 4);
    raw(&value, 4);
  }
  void f32(const std::string& key, float value) {
    entry(key, 6);
    raw(&value, 4);
  }
  // A tensor of F32 zeros (or `bytes` zero bytes of type `type`, or `data`).
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type = 0,
              uint64_t bytes = 0, std::string data = "") {
    uint64_t count = 1;
    for (uint64_t d : dims)
      count *= d;
    if (data.empty())
      data.assign(bytes ? bytes : count * 4, '\0');
    tensors_.push_back({name, std::move(dims), type, std::move(data)});
  }
  std::string bytes() const {
    std::string out = "GGUF";
    auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    const uint32_t version = 3;
    const uint64_t tensorCount = tensors_.size(), kvCount = kvCount_;
    put(&version, 4);
    put(&tensorCount, 8);
    put(&kvCount, 8);
    out += kv_;
    uint64_t offset = 0;
    std::string data;
    for (const Tensor& t : tensors_) {
      const uint64_t length = t.name.size();
      const uint32_t dimCount = static_cast<uint32_t>(t.dims.size());
      put(&length, 8);
      out += t.name;
      put(&dimCount, 4);
      put(t.dims.data(), 8 * t.dims.size());
      put(&t.type, 4);
      put(&offset, 8);
      data += t.data;
      data.resize((data.size() + 31) / 32 * 32, '\0');
      offset = data.size();
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out + data;
  }
  // The llama-shaped model these tests start from: 1 layer, hidden 32, vocab 8.
  void llama() {
    string("general.architecture", "llama");
    u32("llama.embedding_length", 32);
    u32("llama.block_count", 1);
    u32("llama.feed_forward_length", 64);
    u32("llama.attention.head_count", 2);
    u32("llama.context_length", 64);
    f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tensor("token_embd.weight", {32, 8});
  }

private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string data;
  };
  void raw(const void* p, size_t n) { kv_.append(static_cast<const char*>(p), n); }
  void text(const std::string& value) {
    const uint64_t length = value.size();
    raw(&length, 8);
    kv_ += value;
  }
  void entry(const std::string& key, uint32_t type) {
    text(key);
    raw(&type, 4);
    ++kvCount_;
  }
  std::string kv_;
  uint64_t kvCount_ = 0;
  std::vector<Tensor> tensors_;
};

std::string importError(const GgufBuilder& builder) {
  ScratchDir dir;
  auto model = importGguf(dir.write("model.gguf", builder.bytes()));
  return errorText(model);
}

// Each case edits the llama-shaped file (or starts from nothing) and names the error.
TEST(GgufImport, NamesWhatIsNotSupported) {
  const struct {
    bool llamaBase;
    std::function<void(GgufBuilder&)> edit;
    const char* expected;
  } cases[] = {
      {false, [](GgufBuilder& b) { b.string("general.architecture", "gptneox"); },
       "architecture 'gptneox' is not supported (supported: llama, qwen2, qwen3, phi3, smollm3, "
       "olmo2)"},
      {false,
       [](GgufBuilder& b) {
         b.string("general.architecture", "llama");
         b.u32("llama.embedding_length", 32);
       },
       "metadata 'llama.block_count' is missing"},
      {true,
       [](GgufBuilder& b) {
         b.tensor("blk.0.attn_q.weight", {256, 32}, /*IQ2_XXS*/ 16, 32 * 66);
       },
       "tensor 'blk.0.attn_q.weight' has ggml type IQ2_XXS, which ninferc cannot read"},
      {true, [](GgufBuilder& b) { b.string("tokenizer.ggml.model", "bert"); },
       "tokenizer.ggml.model 'bert' is not supported"},
      {true, [](GgufBuilder& b) { b.u32("llama.rope.dimension_count", 8); },
       "RoPE over 8 of 16 head dimensions"},
      {true, [](GgufBuilder& b) { b.u32("split.count", 3); },
       "one part of a GGUF split in 3 files; join them first"},
      {true,
       [](GgufBuilder& b) {
         b.u32("llama.attention.sliding_window", 4096);
         b.u32("llama.attention.sliding_window_pattern", 4);
       },
       "a sliding window on some layers only"},
      {true, [](GgufBuilder& b) { b.u32("tokenizer.ggml.add_eos_token", 1); },
       "tokenizer.ggml.add_eos_token is not supported yet"},
      {true,
       [](GgufBuilder& b) {
         b.tensor("token_embd.weight", {32, 8});
       },
       "tensor 'token_embd.weight': appears twice"},
      {true, [](GgufBuilder& b) { b.string("llama.attention.head_count_kv", "two"); },
       "metadata 'llama.attention.head_count_kv' must be an integer"},
      {true, [](GgufBuilder& b) { b.tensor("rope_factors_long.weight", {8}); },
       "LongRoPE needs tensor 'rope_factors_short.weight' of 8 F32 values"},
      {true,
       [](GgufBuilder& b) {
         b.tensor("rope_factors_long.weight", {8});
         b.tensor("rope_factors_short.weight", {8});
       },
       "LongRoPE needs llama.rope.scaling.original_context_length"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    GgufBuilder builder;
    if (c.llamaBase)
      builder.llama();
    c.edit(builder);
    EXPECT_NE(importError(builder).find(c.expected), std::string::npos) << importError(builder);
  }
}

TEST(GgufImport, ReadsTheShapeOfAHandMadeFile) {
  GgufBuilder builder;
  builder.llama();
  builder.u32("llama.attention.head_count_kv", 1);
  ScratchDir dir;
  auto model = importGguf(dir.write("model.gguf", builder.bytes()));
  ASSERT_TRUE(bool(model)) << errorText(model);
  EXPECT_EQ(model->config.family, "llama");
  EXPECT_EQ(model->config.hiddenSize, 32);
  EXPECT_EQ(model->config.heads, 2);
  EXPECT_EQ(model->config.kvHeads, 1);
  EXPECT_EQ(model->config.headDim, 16);
  EXPECT_EQ(model->config.vocabSize, 8);
  EXPECT_TRUE(model->config.tieWordEmbeddings);
  const TensorRef* embedding = model->weights->find("model.embed_tokens.weight");
  ASSERT_TRUE(embedding);
  EXPECT_EQ(embedding->shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(model->tokenizer->kind, plan::TokenizerKind::None);
  EXPECT_EQ(model->summary, "GGUF v3, llama, F32 x1");
}

// Random ggml blocks of `type` for `rows` rows of `cols` values, their f16 scales finite.
std::string randomBlocks(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const GgmlTypeTraits traits = ggmlTypeTraits(static_cast<uint32_t>(type));
  std::string data(rows * cols / traits.blockValues * traits.blockBytes, '\0');
  uint32_t state = seed;
  for (char& byte : data) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<char>(state >> 24);
  }
  for (size_t block = 0; block < data.size(); block += traits.blockBytes) {
    state = state * 1664525u + 1013904223u;
    const uint16_t scale = floatToHalfBits(static_cast<float>(int(state >> 20) - 2048) * 1e-5f);
    std::memcpy(&data[block], &scale, 2);
  }
  return data;
}

// q8_0/q4_0/q5_0 kept packed: every value of the store's tensor equals ggml's decoding of
// its row (llama's q rows taken in Hugging Face's order); with keepExactFormats off, f16.
TEST(GgufImport, ExactFormatsKeepEveryValue) {
  const struct {
    GgmlType type;
    int bits;
  } cases[] = {{GgmlType::Q8_0, 8}, {GgmlType::Q4_0, 4}, {GgmlType::Q5_0, 5}};
  for (const auto& c : cases) {
    SCOPED_TRACE(ggmlTypeTraits(static_cast<uint32_t>(c.type)).name);
    const int64_t rows = 32, cols = 256; // q: 2 heads x head_dim 16
    const std::string data = randomBlocks(c.type, rows, cols, c.bits);
    GgufBuilder builder;
    builder.llama();
    builder.tensor("blk.0.attn_q.weight", {cols, rows}, static_cast<uint32_t>(c.type), 0, data);
    ScratchDir dir;
    const std::string path = dir.write("model.gguf", builder.bytes());
    auto model = importGguf(path);
    ASSERT_TRUE(bool(model)) << errorText(model);
    EXPECT_EQ(model->exactTensors, 1u);
    const TensorRef* ref = model->weights->find("model.layers.0.self_attn.q_proj.weight");
    ASSERT_TRUE(ref);
    ASSERT_EQ(quantFormatOf(ref->dtype), quant::quantFormatIndex(c.bits, 32));
    ASSERT_EQ(ref->shape, (std::vector<int64_t>{rows, cols}));
    const int64_t rowBytes = static_cast<int64_t>(data.size()) / rows;
    std::vector<float> expected(cols);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t head = r / 16, half = (r % 16) / 8, i = r % 8;
      const int64_t source = head * 16 + 2 * i + half;
      dequantizeGgmlRow(static_cast<uint32_t>(c.type),
                        reinterpret_cast<const uint8_t*>(data.data()) + source * rowBytes,
                        expected.data(), cols);
      const auto* words = reinterpret_cast<const unsigned int*>(
          ref->data + r * quant::quantRowWeightBytes(c.bits, cols));
      const auto* scales = reinterpret_cast<const uint16_t*>(
          ref->data + quant::quantScalePlaneOffset(c.bits, rows, cols) + r * cols / 32 * 2);
      for (int64_t k = 0; k < cols; ++k) {
        const int q = static_cast<int>(quant::quantCodeAt(c.bits, words, k)) - (1 << (c.bits - 1));
        ASSERT_EQ(static_cast<float>(q) * halfBitsToFloat(scales[k / 32]), expected[k])
            << "row " << r << " column " << k;
      }
    }

    GgufReadOptions floats;
    floats.keepExactFormats = false;
    auto decoded = importGguf(path, floats);
    ASSERT_TRUE(bool(decoded)) << errorText(decoded);
    EXPECT_EQ(decoded->exactTensors, 0u);
    EXPECT_EQ(decoded->decodedTensors, 1u);
    EXPECT_EQ(decoded->weights->find("model.layers.0.self_attn.q_proj.weight")->dtype,
              WeightDType::F16);
  }
}

// A 1-D tensor of blocks (a norm weight in Q8_0) is decoded whole, to F32.
TEST(GgufImport, AQuantizedVectorIsDecodedWhole) {
  const std::string data = randomBlocks(GgmlType::Q8_0, 1, 64, 7);
  GgufBuilder builder;
  builder.llama();
  builder.tensor("blk.0.attn_norm.weight", {64}, static_cast<uint32_t>(GgmlType::Q8_0), 0, data);
  ScratchDir dir;
  auto model = importGguf(dir.write("model.gguf", builder.bytes()));
  ASSERT_TRUE(bool(model)) << errorText(model);
  const TensorRef* ref = model->weights->find("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(ref);
  ASSERT_EQ(ref->dtype, WeightDType::F32);
  ASSERT_EQ(ref->bytes, 64u * 4);
  std::vector<float> expected(64), got(64);
  dequantizeGgmlRow(static_cast<uint32_t>(GgmlType::Q8_0),
                    reinterpret_cast<const uint8_t*>(data.data()), expected.data(), 64);
  std::memcpy(got.data(), ref->data, ref->bytes);
  EXPECT_EQ(got, expected);
}

// Everything the runtime's tokenizers read from a table, but add_bos (whose default the
// callers set from other files).
void expectSameTable(const plan::TokenizerT& got, const plan::TokenizerT& want) {
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_EQ(got.merges, want.merges);
  EXPECT_EQ(got.special_ids, want.special_ids);
  EXPECT_EQ(got.unk_id, want.unk_id);
  EXPECT_EQ(got.byte_fallback, want.byte_fallback);
  EXPECT_EQ(got.add_dummy_prefix, want.add_dummy_prefix);
  EXPECT_EQ(got.pretokenizer, want.pretokenizer);
  EXPECT_EQ(got.ignore_merges, want.ignore_merges);
  EXPECT_EQ(got.normalizer, want.normalizer);
  EXPECT_EQ(got.bos_id, want.bos_id);
  EXPECT_EQ(got.eos_ids, want.eos_ids);
}

// llama.cpp's converter wrote the tokenizer of tiny-llama3.gguf from tiny-spm-384.model, and
// spm-bytes-tokenizer.gguf from tiny-spm-bytes-384.model (byte fallback, as Llama 2's).
TEST(GgufImport, SentencePieceTokenizerEqualsTheModelFile) {
  const struct {
    const char* gguf;
    const char* model;
    bool byteFallback;
  } cases[] = {{"tiny-llama3.gguf", "tiny-spm-384.model", false},
               {"spm-bytes-tokenizer.gguf", "tiny-spm-bytes-384.model", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.gguf);
    auto model = importGguf(goldenGguf(c.gguf));
    ASSERT_TRUE(bool(model)) << errorText(model);
    auto sp = readSentencePieceModel(goldenGguf(c.model));
    ASSERT_TRUE(bool(sp)) << errorText(sp);
    auto direct = sentencePieceTokenizer(*sp);
    ASSERT_TRUE(bool(direct)) << errorText(direct);
    const plan::TokenizerT& got = *model->tokenizer;
    EXPECT_EQ(got.kind, plan::TokenizerKind::SentencePieceBpe);
    EXPECT_EQ(got.byte_fallback, c.byteFallback);
    expectSameTable(got, **direct);
    EXPECT_TRUE(got.add_bos); // llama.cpp's default for SentencePiece, or the checkpoint's
    EXPECT_EQ(model->decodedTensors, 0u);
  }
}

// llama.cpp's converter wrote pycode-tokenizer.gguf from pycode-llama-3m's tokenizer.json.
TEST(GgufImport, ByteLevelTokenizerEqualsTokenizerJson) {
  const std::string modelDir = test::sharedDir() + "/models/pycode-llama-3m";
  auto config = loadModelConfig(modelDir);
  ASSERT_TRUE(bool(config)) << errorText(config);
  auto direct = importTokenizer(modelDir, *config);
  ASSERT_TRUE(bool(direct)) << errorText(direct);
  auto model = importGguf(goldenGguf("pycode-tokenizer.gguf"));
  ASSERT_TRUE(bool(model)) << errorText(model);
  EXPECT_EQ(model->tokenizer->kind, plan::TokenizerKind::ByteLevelBpe);
  expectSameTable(*model->tokenizer, **direct);
  EXPECT_EQ(model->tokenizer->add_bos, (*direct)->add_bos);
}

// ninferc's path: a GGUF file cut short is refused before anything is written.
TEST(GgufImport, ACutFileWritesNoPlan) {
  const std::string whole = fileBytes(goldenGguf("tiny-qwen2.gguf"));
  ASSERT_GT(whole.size(), 100000u);
  ScratchDir dir;
  CompileOptions options;
  options.input = dir.write("cut.gguf", whole.substr(0, whole.size() - 1000));
  options.output = dir.file("out.nplan");
  auto compiled = compileModel(options);
  EXPECT_NE(errorText(compiled).find("runs past the end of the file"), std::string::npos);
  EXPECT_FALSE(llvm::sys::fs::exists(options.output));

  options.input = dir.write("text.gguf", "not a model");
  auto text = compileModel(options);
  EXPECT_NE(errorText(text).find("not a GGUF file"), std::string::npos);
  EXPECT_FALSE(llvm::sys::fs::exists(options.output));

  options.input = goldenGguf("tiny-qwen2.gguf");
  options.dummyWeights = true;
  auto dummy = compileModel(options);
  EXPECT_NE(errorText(dummy).find("--dummy-weights takes a config.json, not a GGUF file"),
            std::string::npos);
  EXPECT_FALSE(llvm::sys::fs::exists(options.output));
}

TEST(GgufImport, IsGgufFileLooksAtTheBytes) {
  EXPECT_TRUE(isGgufFile(referencePath()));
  EXPECT_FALSE(isGgufFile(test::testDir()));
  EXPECT_FALSE(isGgufFile(test::testDir() + "/no-such.gguf"));
  EXPECT_FALSE(isGgufFile(goldenGguf("tiny-spm-384.model")));
}

} // namespace
} // namespace ninfer
