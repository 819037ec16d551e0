// Layout of DType TQ2: ternary weights {-s, 0, +s} (BitNet b1.58) as 2-bit codes
// plus one f32 scale per tensor. Shared by the packer in the compiler
// (compiler/TernaryPacking.cpp), the device kernels (codegen/kernels/
// linear_ternary.cuh, fill.cuh) and the CPU executor, so the three can never
// disagree. Compiles as host C++ and as NVRTC device code: no standard header.
//
// Values. A code c (2 bits) reads back as  t = (c & 1) - (c >> 1):
//   00 -> 0,  01 -> +1,  10 -> -1,  11 -> 0 (never written by the packer).
// Bit 0 is the "add x" flag and bit 1 the "subtract x" flag, so a kernel tests
// one bit per action and needs no decode table; 11 still reads as 0 everywhere.
// The weight is  w = s * t  with s the tensor's f32 scale.
//
// Layout of a tensor W [rows, cols] (row-major like the checkpoint, one row per
// output feature; cols a multiple of 64):
//
//   [codes: rows x cols/4 bytes][scale: one little-endian f32][nothing else]
//
// * Codes: row r starts at byte r * cols/4. Value k of a row is in u32 word
//   k/16 of the row, bits 2*(k%16) (little-endian words, like Q2 in
//   QuantFormats.h): the 16-byte word j of a row holds values 64j..64j+63, so a
//   GEMV lane streams a row with coalesced 16-byte loads, and every row starts
//   16-byte aligned because cols/4 is a multiple of 16.
// * Scale: at byte offset rows * cols/4 (16-byte aligned, see above).
// So a tensor is exactly rows * cols / 4 + 4 bytes: 2 bits per weight plus 32
// bits per tensor. Why one f32 per tensor and not per row: BitNet b1.58 trains
// with one absmean scale per tensor, and f32 holds any bf16/f16 scale exactly,
// so the packed weights reproduce the checkpoint's values bit for bit.
//
// Dummy weights (--dummy-weights plans): the executors fill a TQ2 buffer in
// 16-bit units (the CUDA fill kernel is called with count = size_bytes / 2).
// Unit u < count - 2 holds the codes of values 8u..8u+7, each
// dummyCode(seed, value) (uniform over {0, +1, -1}, never 11); the last two units
// are the low and high halves of the f32 scale, which is the DummyFill scale.
#pragma once

#include "DummyFill.h"
#include "HalfFloat.h" // floatToBits, bitsToFloat
#include "HostDevice.h"

namespace ninfer {
namespace ternary {

constexpr int kColsMultiple = 64;       // values per 16-byte word of a row
constexpr int kValuesPerWord = 16;      // values per u32 word
constexpr unsigned int kCodeZero = 0u;  // 00
constexpr unsigned int kCodePlus = 1u;  // 01
constexpr unsigned int kCodeMinus = 2u; // 10

NINFER_HD constexpr bool isPackableCols(long long cols) {
  return cols > 0 && cols % kColsMultiple == 0;
}
NINFER_HD constexpr long long rowBytes(long long cols) { return cols / 4; }
NINFER_HD constexpr long long rowWords(long long cols) { return cols / kValuesPerWord; }
NINFER_HD constexpr long long scaleOffset(long long rows, long long cols) {
  return rows * rowBytes(cols);
}
NINFER_HD constexpr long long tensorBytes(long long rows, long long cols) {
  return scaleOffset(rows, cols) + 4;
}
static_assert(tensorBytes(3, 1024) * 8 == 3 * 1024 * 2 + 32, "2 bits per weight + one f32");
static_assert(rowBytes(64) % 16 == 0, "rows are 16-byte aligned");

// -1, 0, +1 of a code (11 reads as 0).
NINFER_HD constexpr int codeValue(unsigned int code) {
  return static_cast<int>(code & 1u) - static_cast<int>((code >> 1) & 1u);
}
NINFER_HD constexpr unsigned int encode(int t) {
  return t > 0 ? kCodePlus : t < 0 ? kCodeMinus : kCodeZero;
}

// The tensor-core GEMMs' decode (codegen/kernels/gemm_ternary.cuh): values 2m, 2m + 1 of
// a word (m in 0..7) as f16 bits of -s, 0 or +s (scaleBits: the f16 bits of s > 0), the first
// value in the low half.
NINFER_HD constexpr unsigned int codeF16(unsigned int code, unsigned int scaleBits) {
  return code == kCodePlus ? scaleBits : code == kCodeMinus ? (scaleBits | 0x8000u) : 0u;
}
NINFER_HD constexpr unsigned int codePairF16(unsigned int word, int m, unsigned int scaleBits) {
  return codeF16((word >> (4 * m)) & 3u, scaleBits) |
         codeF16((word >> (4 * m + 2)) & 3u, scaleBits) << 16;
}

// Code of value k of a row whose words start at `row`.
NINFER_HD inline unsigned int codeAt(const unsigned int* row, long long k) {
  return (row[k / kValuesPerWord] >> (2 * (k % kValuesPerWord))) & 3u;
}

// Packs one row of cols values t[k] in {-1, 0, +1} into rowWords(cols) words.
NINFER_HD inline void packRow(const signed char* t, long long cols, unsigned int* words) {
  for (long long w = 0; w < rowWords(cols); ++w) {
    unsigned int word = 0;
    for (int j = 0; j < kValuesPerWord; ++j)
      word |= encode(t[w * kValuesPerWord + j]) << (2 * j);
    words[w] = word;
  }
}

// A little-endian f32 at p (any alignment), and back.
NINFER_HD inline float readF32(const unsigned char* p) {
  return bitsToFloat(static_cast<unsigned int>(p[0]) | (static_cast<unsigned int>(p[1]) << 8) |
                     (static_cast<unsigned int>(p[2]) << 16) |
                     (static_cast<unsigned int>(p[3]) << 24));
}

NINFER_HD inline void writeF32(unsigned char* p, float value) {
  const unsigned int bits = floatToBits(value);
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(bits >> (8 * i));
}

// The tensor's scale from its bytes (any alignment).
NINFER_HD inline float readScale(const unsigned char* tensor, long long rows, long long cols) {
  return readF32(tensor + scaleOffset(rows, cols));
}

NINFER_HD inline void writeScale(unsigned char* tensor, long long rows, long long cols, float s) {
  writeF32(tensor + scaleOffset(rows, cols), s);
}

// Reference dequantization of row r: out[k] = s * t(k), computed as a select so
// the values are exactly {-s, 0, +s} (0 is +0).
NINFER_HD inline void dequantizeRow(const unsigned char* tensor, long long rows, long long cols,
                                    long long r, float* out) {
  const float s = readScale(tensor, rows, cols);
  const unsigned char* row = tensor + r * rowBytes(cols);
  for (long long k = 0; k < cols; ++k) {
    const unsigned int code = (row[k / 4] >> (2 * (k % 4))) & 3u; // little-endian words
    const int t = codeValue(code);
    out[k] = t > 0 ? s : t < 0 ? -s : 0.0f;
  }
}

// ---- Dummy fill (see the layout comment) ----

NINFER_HD inline unsigned int dummyCode(unsigned int seed, unsigned long long value) {
  return encode(static_cast<int>(dummyHash(seed, value) % 3ull) - 1);
}

// 16-bit unit `unit` of a dummy TQ2 buffer of `units` = size_bytes / 2 units.
NINFER_HD inline unsigned short dummyUnit(unsigned int seed, unsigned long long unit,
                                          unsigned long long units, float scale) {
  if (unit + 2 >= units) {
    const unsigned int bits = floatToBits(scale);
    return static_cast<unsigned short>(unit + 2 == units ? (bits & 0xFFFFu) : (bits >> 16));
  }
  unsigned int half = 0;
  for (int j = 0; j < 8; ++j)
    half |= dummyCode(seed, unit * 8ull + static_cast<unsigned long long>(j)) << (2 * j);
  return static_cast<unsigned short>(half);
}

} // namespace ternary
} // namespace ninfer
