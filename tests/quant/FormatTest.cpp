// The shared format header (ninfer/QuantFormats.h): traits and sizes, exact
// pack/unpack round trips for every format, the documented bit order, and that NVRTC
// compiles the header as device code (no GPU needed). Its fp16 conversions
// (ninfer/HalfFloat.h) are tested in tests/runtime/HalfTest.cpp.
#include "Packing.h"
#include "QuantTestUtil.h"

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ninfer {
namespace quant {
namespace {

const int kAllBits[] = {8, 6, 5, 4, 3, 2};
const int kAllGroups[] = {32, 64, 128};

TEST(QuantFormats, TraitsTableAndExactBitsPerWeight) {
  for (int id = 0; id < kQuantFormatCount; ++id) {
    const QuantFormatTraits t = quantFormatTraits(static_cast<QuantFormatId>(id));
    const bool k16 = t.groupSize == kQuantK16Group;
    ASSERT_TRUE(isQuantBits(t.bits)) << id;
    ASSERT_TRUE(isQuantFormatGroup(t.groupSize)) << id;
    EXPECT_EQ(isQuantGroupSize(t.groupSize), !k16) << id;
    EXPECT_EQ(quantFormatIndex(t.bits, t.groupSize), id);
    EXPECT_EQ(std::string(t.name),
              "q" + std::to_string(t.bits) + (k16 ? "_k16" : "_g" + std::to_string(t.groupSize)));
    EXPECT_EQ(t.bytesPerGroup, t.bits * t.groupSize / 8 + (k16 ? 1 : 2));
    // bpw = bits + 16 / group exactly (K16: bits + 1/2, an 8-byte record per 128
    // values): bytes * 8 / values, and for whole tensors.
    const double bpw = t.bits + (k16 ? 0.5 : 16.0 / t.groupSize);
    EXPECT_EQ(t.bytesPerGroup * 8.0 / t.groupSize, bpw);
    const QuantSpec spec{t.bits, t.groupSize};
    EXPECT_EQ(spec.bitsPerWeight(), bpw);
    for (long long rows : {1LL, 7LL, 4096LL})
      for (long long cols : {128LL, 512LL, 1536LL, 14336LL})
        EXPECT_EQ(quantTensorBytes(t.bits, t.groupSize, rows, cols) * 8.0,
                  static_cast<double>(rows * cols) * bpw);
  }
  EXPECT_EQ(quantFormatTraits(static_cast<QuantFormatId>(200)).bits, 0);
  EXPECT_EQ(quantFormatIndex(7, 64), -1);
  EXPECT_EQ(quantFormatIndex(5, 64), int(QuantFormatId::Q5G64));
  EXPECT_EQ(quantFormatIndex(4, 96), -1);
  EXPECT_EQ(quantFormatIndex(3, 16), int(QuantFormatId::Q3K16));
  EXPECT_EQ(quantFormatIndex(5, 16), -1); // K16 only for 4, 3, 2 bits
  EXPECT_FALSE(isQuantizableCols(64));
  EXPECT_TRUE(isQuantizableCols(256));
}

TEST(QuantFormats, PackUnpackRoundTripIsExact) {
  test::Rng rng(1);
  const int64_t rows = 5, cols = 640;
  for (int bits : kAllBits) {
    for (int group : kAllGroups) {
      SCOPED_TRACE("q" + std::to_string(bits) + "_g" + std::to_string(group));
      const QuantSpec spec{bits, group};
      std::vector<uint8_t> codes(rows * cols);
      std::vector<uint16_t> scales(rows * cols / group);
      for (uint8_t& c : codes)
        c = static_cast<uint8_t>(rng.below(1u << bits));
      for (uint16_t& s : scales)
        s = static_cast<uint16_t>(rng.below(0x7C00)); // any finite positive half
      const uint64_t bytes = quantTensorBytes(bits, group, rows, cols);
      std::vector<uint8_t> packed(bytes, 0xAB); // every byte must be overwritten
      for (int64_t r = 0; r < rows; ++r)
        packRow(spec, rows, cols, r, &codes[r * cols], &scales[r * cols / group], packed.data());

      std::vector<uint8_t> codesBack(cols);
      std::vector<uint16_t> scalesBack(cols / group);
      for (int64_t r = 0; r < rows; ++r) {
        unpackRow(spec, rows, cols, r, packed.data(), codesBack.data(), scalesBack.data());
        ASSERT_EQ(0, std::memcmp(codesBack.data(), &codes[r * cols], cols)) << "row " << r;
        ASSERT_EQ(0, std::memcmp(scalesBack.data(), &scales[r * cols / group], cols / group * 2));
      }
      // The reference decoder gives scale * (code - 2^(bits-1)) for every value.
      std::vector<float> decoded(rows * cols);
      ASSERT_TRUE(dequantizePacked(spec, rows, cols, packed.data(), bytes, decoded.data()).isOk());
      for (int64_t i = 0; i < rows * cols; ++i) {
        const int64_t r = i / cols, c = i % cols;
        const float scale = halfBitsToFloat(scales[r * cols / group + c / group]);
        ASSERT_EQ(decoded[i], scale * static_cast<float>(int(codes[i]) - (1 << (bits - 1))))
            << "value " << i;
      }
      EXPECT_FALSE(
          dequantizePacked(spec, rows, cols, packed.data(), bytes - 1, decoded.data()).isOk());
    }
  }
}

// K16 records: every sub-scale value round-trips at every position, the unit
// scale stays in the first 16 bits, and a group's scale is fp16(d * s_j).
TEST(QuantFormats, K16RecordsRoundTripAndScaleGroups) {
  test::Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    int subs[8];
    for (int& v : subs)
      v = int(rng.below(64)) - 32;
    const uint16_t d = static_cast<uint16_t>(rng.below(0x7C00) | (trial % 2 ? 0x8000u : 0u));
    uint16_t record[4];
    setK16Record(record, d, subs);
    EXPECT_EQ(record[0], d);
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(k16SubScale(record, j), subs[j]) << j;
      EXPECT_EQ(quantGroupScaleBits<kQuantK16Group>(record, j),
                floatToHalfBits(halfBitsToFloat(d) * float(subs[j])));
      EXPECT_EQ(quantGroupScaleBitsOf(kQuantK16Group, record, j),
                quantGroupScaleBits<kQuantK16Group>(record, j));
    }
  }
  // Groups 8.. read the next record.
  const int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, twos[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  uint16_t row[8];
  setK16Record(row, floatToHalfBits(0.5f), ones);
  setK16Record(row + 4, floatToHalfBits(0.25f), twos);
  EXPECT_EQ(halfBitsToFloat(quantGroupScaleBits<kQuantK16Group>(row, 7)), 0.5f);
  EXPECT_EQ(halfBitsToFloat(quantGroupScaleBits<kQuantK16Group>(row, 8)), 0.5f);
  EXPECT_EQ(halfBitsToFloat(quantGroupScaleBits<kQuantK16Group>(row, 15)), 0.5f);
}

// The packer and the reference decoder on K16 tensors: records go to the scale
// plane unchanged and every value decodes as fp16(d * s_j) * level.
TEST(QuantFormats, K16PackAndDecode) {
  test::Rng rng(4);
  const int64_t rows = 3, cols = 384;
  for (int bits : {4, 3, 2}) {
    SCOPED_TRACE("q" + std::to_string(bits) + "_k16");
    const QuantSpec spec{bits, kQuantK16Group};
    std::vector<uint8_t> codes(rows * cols);
    for (uint8_t& c : codes)
      c = static_cast<uint8_t>(rng.below(1u << bits));
    std::vector<uint16_t> records(rows * cols / 32);
    for (size_t u = 0; u < records.size(); u += 4) {
      int subs[8];
      for (int& v : subs)
        v = int(rng.below(64)) - 32;
      // |d| < 2048: d * s stays finite.
      setK16Record(&records[u], static_cast<uint16_t>(rng.below(0x6800)), subs);
    }
    const uint64_t bytes = quantTensorBytes(bits, kQuantK16Group, rows, cols);
    EXPECT_EQ(bytes * 8, uint64_t(rows * cols * (bits * 2 + 1) / 2));
    std::vector<uint8_t> packed(bytes, 0xAB);
    for (int64_t r = 0; r < rows; ++r)
      packRow(spec, rows, cols, r, &codes[r * cols], &records[r * cols / 32], packed.data());
    std::vector<float> decoded(rows * cols);
    ASSERT_TRUE(dequantizePacked(spec, rows, cols, packed.data(), bytes, decoded.data()).isOk());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t r = i / cols, c = i % cols;
      const uint16_t* unit = &records[r * cols / 32 + c / 128 * 4];
      const float scale = halfBitsToFloat(
          floatToHalfBits(halfBitsToFloat(unit[0]) * float(k16SubScale(unit, c % 128 / 16))));
      ASSERT_EQ(decoded[i], scale * static_cast<float>(int(codes[i]) - (1 << (bits - 1)))) << i;
    }
  }
}

// A unit holding only `code` at position 77: exactly two words are non-zero,
// the low plane's and the high plane's, with the given contents.
template <int Bits>
void expectLoneValue(unsigned code, int lowWord, unsigned lowContent, int highWord,
                     unsigned highContent) {
  uint8_t codes[128] = {};
  codes[77] = static_cast<uint8_t>(code);
  QuantUnit<Bits> unit;
  QuantPacking<Bits>::packUnit(codes, unit.words);
  for (int w = 0; w < QuantPacking<Bits>::kUnitWords; ++w) {
    const unsigned expected = w == lowWord ? lowContent : w == highWord ? highContent : 0u;
    EXPECT_EQ(unit.words[w], expected) << "q" << Bits << " word " << w;
  }
  EXPECT_EQ(QuantPacking<Bits>::codeAt(unit.words, 77), code);
}

// The bit order documented in QuantFormats.h, checked on known patterns.
TEST(QuantFormats, DocumentedBitOrder) {
  uint8_t codes[128];
  for (int i = 0; i < 128; ++i)
    codes[i] = static_cast<uint8_t>(i);
  QuantUnit<8> q8;
  QuantPacking<8>::packUnit(codes, q8.words);
  EXPECT_EQ(q8.words[0], 0x03020100u);
  EXPECT_EQ(q8.words[31], 0x7F7E7D7Cu);

  QuantUnit<4> q4;
  QuantPacking<4>::packUnit(codes, q4.words); // codes & 15
  EXPECT_EQ(q4.words[0], 0x76543210u);
  EXPECT_EQ(q4.words[1], 0xFEDCBA98u);

  QuantUnit<2> q2;
  QuantPacking<2>::packUnit(codes, q2.words); // codes & 3: 0,1,2,3,0,...
  for (int w = 0; w < 8; ++w)
    EXPECT_EQ(q2.words[w], 0xE4E4E4E4u) << w;

  QuantUnit<3> q3;
  QuantPacking<3>::packUnit(codes, q3.words); // codes & 7: 0..7 repeating
  for (int w = 0; w < 8; ++w)
    EXPECT_EQ(q3.words[w], 0xE4E4E4E4u) << "low plane word " << w;
  for (int w = 8; w < 12; ++w)
    EXPECT_EQ(q3.words[w], 0xF0F0F0F0u) << "high plane word " << w; // bit 2 set for 4..7
  // One value: code 5 (binary 101) at position 77.
  expectLoneValue<3>(5, 77 / 16, 1u << (2 * (77 % 16)), 8 + 77 / 32, 1u << (77 % 32));

  QuantUnit<6> q6;
  QuantPacking<6>::packUnit(codes, q6.words); // codes 0..63, then 0..63 again
  EXPECT_EQ(q6.words[0], 0x76543210u) << "low plane: the Q4 layout";
  EXPECT_EQ(q6.words[15], 0xFEDCBA98u);
  // Bits 4-5 of codes 0..15 are 0, of 16..31 are 1: word 16 is all 0, word 17 all 01.
  EXPECT_EQ(q6.words[16], 0x00000000u);
  EXPECT_EQ(q6.words[17], 0x55555555u);
  EXPECT_EQ(q6.words[19], 0xFFFFFFFFu); // codes 48..63
  EXPECT_EQ(q6.words[23], 0xFFFFFFFFu); // codes 112..127 & 63 = 48..63

  QuantUnit<5> q5;
  QuantPacking<5>::packUnit(codes, q5.words); // codes & 31: 0..31 repeating
  EXPECT_EQ(q5.words[1], 0xFEDCBA98u);
  for (int w = 16; w < 20; ++w)
    EXPECT_EQ(q5.words[w], 0xFFFF0000u) << "high plane word " << w; // bit 4 set for 16..31
  expectLoneValue<5>(0x15, 77 / 8, 5u << (4 * (77 % 8)), 16 + 77 / 32, 1u << (77 % 32));
}

// The run-time dispatch reads what the templates read, for every width.
TEST(QuantFormats, CodeAtByBitsMatchesTemplates) {
  test::Rng rng(3);
  unsigned int words[2 * 32]; // two units of the widest format
  for (unsigned int& w : words)
    w = static_cast<unsigned int>(rng.next());
  for (long long k = 0; k < 256; ++k) {
    EXPECT_EQ(quantCodeAt(8, words, k), QuantPacking<8>::codeAt(words, k));
    EXPECT_EQ(quantCodeAt(6, words, k), QuantPacking<6>::codeAt(words, k));
    EXPECT_EQ(quantCodeAt(5, words, k), QuantPacking<5>::codeAt(words, k));
    EXPECT_EQ(quantCodeAt(4, words, k), QuantPacking<4>::codeAt(words, k));
    EXPECT_EQ(quantCodeAt(3, words, k), QuantPacking<3>::codeAt(words, k));
    EXPECT_EQ(quantCodeAt(2, words, k), QuantPacking<2>::codeAt(words, k));
    EXPECT_LT(quantCodeAt(5, words, k), 32u);
    EXPECT_LT(quantCodeAt(6, words, k), 64u);
  }
}

std::string readHeader(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// NVRTC compiles the header as device code with no header but its own siblings
// (DummyFill.h, HostDevice.h, HalfFloat.h) available.
TEST(QuantFormats, CompilesWithNvrtc) {
  const std::string formatsPath = NINFER_QUANT_FORMATS_HEADER;
  const std::string header = readHeader(formatsPath);
  ASSERT_FALSE(header.empty()) << formatsPath;
  const std::string dir = formatsPath.substr(0, formatsPath.rfind('/') + 1);
  const std::string dummyFill = readHeader(dir + "DummyFill.h");
  const std::string hostDevice = readHeader(dir + "HostDevice.h");
  const std::string halfFloat = readHeader(dir + "HalfFloat.h");
  ASSERT_FALSE(dummyFill.empty());
  ASSERT_FALSE(hostDevice.empty());
  ASSERT_FALSE(halfFloat.empty());
  const char* source = R"(#include "QuantFormats.h"
using namespace ninfer::quant;
template <int B, int G>
__device__ void decode(const unsigned int *w, const unsigned short *s, float *out) {
  QuantFormat<B, G>::dequantizeGroup(w, s, threadIdx.x, out + threadIdx.x * G);
}
extern "C" __global__ void probe(const unsigned int *w, const unsigned short *s, float *out) {
  decode<8, 32>(w, s, out); decode<8, 64>(w, s, out); decode<8, 128>(w, s, out);
  decode<4, 32>(w, s, out); decode<4, 64>(w, s, out); decode<4, 128>(w, s, out);
  decode<3, 32>(w, s, out); decode<3, 64>(w, s, out); decode<3, 128>(w, s, out);
  decode<2, 32>(w, s, out); decode<2, 64>(w, s, out); decode<2, 128>(w, s, out);
  decode<6, 32>(w, s, out); decode<6, 64>(w, s, out); decode<6, 128>(w, s, out);
  decode<5, 32>(w, s, out); decode<5, 64>(w, s, out); decode<5, 128>(w, s, out);
  out[2] = static_cast<float>(quantCodeAt(static_cast<int>(threadIdx.x), w, 5));
  out[0] = ninfer::roundToHalf(out[1]) + quantFormatTraits(QuantFormatId::Q3G64).bytesPerGroup +
           static_cast<float>(quantTensorBytes(3, 64, 2, 256));
})";
  nvrtcProgram program;
  const char* headers[] = {header.c_str(), dummyFill.c_str(), hostDevice.c_str(),
                           halfFloat.c_str()};
  const char* names[] = {"QuantFormats.h", "DummyFill.h", "HostDevice.h", "HalfFloat.h"};
  ASSERT_EQ(nvrtcCreateProgram(&program, source, "probe.cu", 4, headers, names), NVRTC_SUCCESS);
  const char* options[] = {"--gpu-architecture=sm_80", "-std=c++17"};
  const nvrtcResult result = nvrtcCompileProgram(program, 2, options);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  nvrtcGetProgramLog(program, &log[0]);
  nvrtcDestroyProgram(&program);
  EXPECT_EQ(result, NVRTC_SUCCESS) << log;
}

} // namespace
} // namespace quant
} // namespace ninfer
