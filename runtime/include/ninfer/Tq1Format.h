// Layout of DType TQ1: ternary weights {-s, 0, +s} packed in base 3, five per
// byte (3^5 = 243 <= 256), plus one f32 scale per tensor. Shared by the packer
// in the compiler (compiler/TernaryPacking.cpp), the device kernels
// (codegen/kernels/linear_tq1.cuh, gemv_tq1_mma.cuh, fill.cuh) and the CPU executor. Compiles as
// host C++ and as NVRTC device code: no standard header.
//
// Digits. A weight t in {-1, 0, +1} is the digit d = t + 1 in {0, 1, 2}. Five
// digits d0..d4 form v = d0*81 + d1*27 + d2*9 + d3*3 + d4 in [0, 242], and the
// byte stores v as an 8-bit fraction of 243: b = ceil(v * 256 / 243). Then
// b / 256 reads as 0.d0 d1 d2 d3 d4 in base 3, and the digits come out one
// after the other by multiply-and-shift, most significant first:
//   q = b;  for i = 0..4:  p = 3 * q;  d_i = p >> 8;  q = p & 255.
// (kAllBytesDecode below checks all 243 bytes at compile time.) Each step needs
// only 16 bits, so a kernel decodes two bytes at once in the 16-bit halves of a
// u32 (bytes 0 and 2 of a word, then 1 and 3): no table, no weight multiply.
// Bytes 243..255 are never written; they still decode to digits 0..2.
//
// Layout of a tensor W [rows, cols] (row-major, one row per output feature;
// cols a positive multiple of 16):
//
//   [codes: rows x rowBytes(cols) bytes][scale: one little-endian f32]
//
// * A row is chunks(cols) = ceil(cols / 80) chunks of 16 bytes (80 values), so
//   every row starts 16-byte aligned and a lane streams it with 16-byte loads.
// * Byte j (0..15) of chunk c holds, as digit i (0..4), the value
//     k = 80 c + 16 i + j,
//   i.e. digit i of the 16 bytes of a chunk is a contiguous run of 16 values,
//   and digit i of the 4 bytes of u32 word w of the chunk is 4 contiguous values
//   (one float4 of activations: 80 c + 16 i + 4 w .. +3).
// * Values past cols in the last chunk (padding) are written as t = 0; kernels
//   never read them (cols is a multiple of 16, so padding is whole digits).
// * Scale: at byte offset rows * rowBytes(cols), a multiple of 16.
// Size: rows * 16 * ceil(cols / 80) + 4 bytes, 1.6 bits per weight when cols is
// a multiple of 80, 1.625 bpw at cols = 4096 (52 chunks for 51.2), 1.75 at 512.
//
// Dummy weights (--dummy-weights plans): filled in 16-bit units like TQ2 (count
// = size_bytes / 2): unit u < count - 2 is the low 16 bits of dummyHash(seed,
// u) (any byte decodes to valid digits, about uniform over {-1, 0, +1}; padding
// digits are random too and never read); the last two units are the low and
// high halves of the f32 scale, the DummyFill scale.
#pragma once

#include "TernaryFormat.h" // readF32, writeF32, floatToBits, NINFER_HD, DummyFill.h

namespace ninfer {
namespace tq1 {

constexpr int kColsMultiple = 16; // cols must be a multiple of this
constexpr int kDigits = 5;        // values per byte
constexpr int kChunkBytes = 16;   // bytes per chunk (one 16-byte load)
constexpr int kChunkValues = 80;  // values per chunk
constexpr int kWordsPerChunk = 4; // u32 words per chunk

NINFER_HD constexpr bool isPackableCols(long long cols) {
  return cols > 0 && cols % kColsMultiple == 0;
}
NINFER_HD constexpr long long chunks(long long cols) {
  return (cols + kChunkValues - 1) / kChunkValues;
}
NINFER_HD constexpr long long rowBytes(long long cols) { return chunks(cols) * kChunkBytes; }
NINFER_HD constexpr long long scaleOffset(long long rows, long long cols) {
  return rows * rowBytes(cols);
}
NINFER_HD constexpr long long tensorBytes(long long rows, long long cols) {
  return scaleOffset(rows, cols) + 4;
}
static_assert(tensorBytes(2, 80) == 2 * 16 + 4, "80 values in 16 bytes");
static_assert(rowBytes(4096) == 832 && rowBytes(512) == 112, "rows pad to whole chunks");

// Byte of five digits d[0..4] in {0, 1, 2}, d[0] the most significant.
NINFER_HD constexpr unsigned int encodeDigits(const unsigned int (&d)[kDigits]) {
  const unsigned int v = (((d[0] * 3 + d[1]) * 3 + d[2]) * 3 + d[3]) * 3 + d[4];
  return (v * 256 + 242) / 243;
}

// Digit i (0..4) of byte b.
NINFER_HD constexpr unsigned int digitAt(unsigned int b, int i) {
  unsigned int q = b;
  for (int step = 0; step < i; ++step)
    q = (q * 3) & 255u;
  return (q * 3) >> 8;
}

// Every v in [0, 243) survives encode -> decode.
NINFER_HD constexpr bool allBytesDecode() {
  for (unsigned int v = 0; v < 243; ++v) {
    const unsigned int d[kDigits] = {v / 81, v / 27 % 3, v / 9 % 3, v / 3 % 3, v % 3};
    const unsigned int b = encodeDigits(d);
    if (b > 255)
      return false;
    for (int i = 0; i < kDigits; ++i)
      if (digitAt(b, i) != d[i])
        return false;
  }
  return true;
}
static_assert(allBytesDecode(), "base-3 bytes decode exactly by multiply-and-shift");

// Two bytes at once (the GEMV's decode): bytes 0 and 2 of a little-endian u32
// word as the 16-bit halves of one register (evenLanes), bytes 1 and 3 of
// another (oddLanes). Per digit: p = 3 * lanes (each half stays below 2^16);
// the digits of the two bytes are bits 8-9 and 24-25 of p; lanes = p & kLaneMask
// for the next digit.
constexpr unsigned int kLaneMask = 0x00FF00FFu;
NINFER_HD constexpr unsigned int evenLanes(unsigned int word) { return word & kLaneMask; }
NINFER_HD constexpr unsigned int oddLanes(unsigned int word) { return (word >> 8) & kLaneMask; }

// 3^i for digit i (0..4): (b * 3^i) & 255 is b after i steps of q = (3 q) & 255, since the
// mask is a remainder mod 256; in a 16-bit lane b * 81 stays below 2^16.
NINFER_HD constexpr unsigned int digitMultiplier(int digit) {
  return static_cast<unsigned int>(0x511B090301ull >> (8 * digit)) & 0xFFu;
}
NINFER_HD constexpr bool multipliersTakeDigitSteps() {
  for (unsigned int b = 0; b < 256; ++b) {
    unsigned int q = b;
    for (int i = 0; i < kDigits; q = (q * 3) & 255u, ++i)
      if (((b * digitMultiplier(i)) & 255u) != q)
        return false;
  }
  return true;
}
static_assert(multipliersTakeDigitSteps(), "one multiply by 3^i takes i digit steps");

// Bytes of {hi, lo} (8 bytes, lo first) picked by the low 3 bits of each of the selector's four
// nibbles: the prmt instruction (__byte_perm), and its host equivalent for the tests.
NINFER_HD inline unsigned int pickBytes(unsigned int lo, unsigned int hi, unsigned int selector) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, selector);
#else
  const unsigned long long both = (static_cast<unsigned long long>(hi) << 32) | lo;
  unsigned int out = 0;
  for (int i = 0; i < 4; ++i)
    out |= static_cast<unsigned int>(both >> (8 * ((selector >> (4 * i)) & 7u)) & 0xFFu) << (8 * i);
  return out;
#endif
}

// The tensor-core GEMMs' decode (gemm_ternary.cuh's Tq1Codes): digit i of the four bytes of
// a word as f16 bits of -s, 0 or +s (scaleBits: the f16 bits of s > 0), in two pairs of
// adjacent values, the first value in the low half: pairs[0] = bytes 0, 1 and pairs[1] =
// bytes 2, 3. Digit i of byte j of a chunk is value 80 c + 16 i + j, so the pairs of a
// chunk's four words are 16 adjacent values. Per pair one prmt picks both values' bytes from
// the table {lo: -s, 0; hi: +s}: digit d selects bytes 2d and 2d + 1.
NINFER_HD inline void digitPairsF16(unsigned int word, int digit, unsigned int scaleBits,
                                    unsigned int (&pairs)[2]) {
  const unsigned int multiplier = digitMultiplier(digit);
  // bytes 0 and 2: digits at bits 8-9 and 24-25; bytes 1 and 3 likewise
  const unsigned int even = ((evenLanes(word) * multiplier) & kLaneMask) * 3u;
  const unsigned int odd = ((oddLanes(word) * multiplier) & kLaneMask) * 3u;
  const unsigned int table = scaleBits | 0x8000u; // bytes -s, then two zero bytes
  // Digits da (low value), db (high value) at bits 0-1 and 8-9 of t: nibbles 2da, 2da + 1,
  // 2db, 2db + 1 = t * 0x22 + 0x1010.
  const unsigned int t0 = ((even >> 8) & 3u) | (odd & 0x300u);
  const unsigned int t1 = ((even >> 24) & 3u) | ((odd >> 16) & 0x300u);
  pairs[0] = pickBytes(table, scaleBits, t0 * 0x22u + 0x1010u);
  pairs[1] = pickBytes(table, scaleBits, t1 * 0x22u + 0x1010u);
}
// Value index of digit i of byte j of chunk c.
NINFER_HD constexpr long long valueIndex(long long chunk, int byte, int digit) {
  return chunk * kChunkValues + 16LL * digit + byte;
}

// Packs one row of cols values t[k] in {-1, 0, +1} into rowBytes(cols) bytes.
NINFER_HD inline void packRow(const signed char* t, long long cols, unsigned char* row) {
  for (long long c = 0; c < chunks(cols); ++c)
    for (int j = 0; j < kChunkBytes; ++j) {
      unsigned int d[kDigits];
      for (int i = 0; i < kDigits; ++i) {
        const long long k = valueIndex(c, j, i);
        d[i] = k < cols ? static_cast<unsigned int>(t[k] + 1) : 1u;
      }
      row[c * kChunkBytes + j] = static_cast<unsigned char>(encodeDigits(d));
    }
}

NINFER_HD inline float readScale(const unsigned char* tensor, long long rows, long long cols) {
  return ternary::readF32(tensor + scaleOffset(rows, cols));
}

NINFER_HD inline void writeScale(unsigned char* tensor, long long rows, long long cols, float s) {
  ternary::writeF32(tensor + scaleOffset(rows, cols), s);
}

// Reference dequantization of row r: out[k] = s * t(k) as a select, so the
// values are exactly {-s, 0, +s} (0 is +0).
NINFER_HD inline void dequantizeRow(const unsigned char* tensor, long long rows, long long cols,
                                    long long r, float* out) {
  const float s = readScale(tensor, rows, cols);
  const unsigned char* row = tensor + r * rowBytes(cols);
  for (long long c = 0; c < chunks(cols); ++c)
    for (int j = 0; j < kChunkBytes; ++j) {
      unsigned int q = row[c * kChunkBytes + j];
      for (int i = 0; i < kDigits; ++i) {
        const unsigned int p = q * 3;
        q = p & 255u;
        const long long k = valueIndex(c, j, i);
        if (k < cols)
          out[k] = (p >> 8) == 2 ? s : (p >> 8) == 0 ? -s : 0.0f;
      }
    }
}

// 16-bit unit `unit` of a dummy TQ1 buffer of `units` = size_bytes / 2 units.
NINFER_HD inline unsigned short dummyUnit(unsigned int seed, unsigned long long unit,
                                          unsigned long long units, float scale) {
  if (unit + 2 >= units) {
    const unsigned int bits = floatToBits(scale);
    return static_cast<unsigned short>(unit + 2 == units ? (bits & 0xFFFFu) : (bits >> 16));
  }
  return static_cast<unsigned short>(dummyHash(seed, unit) & 0xFFFFull);
}

} // namespace tq1
} // namespace ninfer
