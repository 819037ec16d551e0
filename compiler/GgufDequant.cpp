// Block layouts from ggml-common.h; the decoding follows ggml's dequantize_row_*
// (value order and float operations), so the results match llama.cpp's.
#include "GgufDequant.h"

#include "GgufFile.h"

#include "ninfer/HalfFloat.h"

#include <cstring>

namespace ninfer {
namespace {

float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return halfBitsToFloat(bits);
}

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: value = (code - offset) * d, or code * d + m with a min.
void legacy(uint32_t type, const uint8_t* b, float* y) {
  uint8_t codes[32];
  const LegacyBlock block = ggmlLegacyCodes(type, b, codes);
  const float d = halfBitsToFloat(block.scaleBits);
  if (block.hasMin) {
    const float m = half(b + 2);
    for (int j = 0; j < 32; ++j)
      y[j] = static_cast<float>(codes[j]) * d + m;
  } else {
    for (int j = 0; j < 32; ++j)
      y[j] = static_cast<float>(codes[j] - block.offset) * d;
  }
}

// Q2_K (256 values): scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = half(b + 80), dmin = half(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half16 = 0; half16 < 2; ++half16) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[l + 16 * half16] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// Q3_K (256 values): hmask[32], qs[64], 12 bytes of 6-bit scales, d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const float dAll = half(b + 108);
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half16 = 0; half16 < 2; ++half16) {
        const float dl = dAll * static_cast<float>(scales[is++] - 32);
        for (int l = 16 * half16; l < 16 * half16 + 16; ++l) {
          const int value = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(value);
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// The 6-bit scale and min of sub-block j of Q4_K/Q5_K's 12 scale bytes.
void scaleMinK4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K (256 values): d, dmin, 12 scale bytes, [qh[32] for Q5_K], qs[128].
void q45_k(const uint8_t* b, float* y, bool five) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + (five ? 48 : 16);
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
    uint8_t sc, m;
    scaleMinK4(is, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    scaleMinK4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K (256 values): ql[128], qh[64], int8 scales[16], d.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): a non-uniform 4-bit grid.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// 32 values of one IQ4 group: qs[16] (low nibbles are values 0..15, high ones 16..31), scale d.
void iq4Group(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Levels[qs[j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4Levels[qs[j] >> 4]);
  }
}

// IQ4_XS (256 values): d, scales_h (u16: bits 5-6 of the 8 groups' scales), scales_l[4]
// (their low nibbles), qs[128]; group scale d * (6-bit scale - 32).
void iq4_xs(const uint8_t* b, float* y) {
  const float d = half(b);
  uint16_t scalesHigh;
  std::memcpy(&scalesHigh, b + 2, 2);
  const uint8_t* scalesLow = b + 4;
  const uint8_t* qs = b + 8;
  for (int g = 0; g < 8; ++g) {
    const int ls =
        ((scalesLow[g / 2] >> (4 * (g % 2))) & 0x0F) | (((scalesHigh >> (2 * g)) & 3) << 4);
    iq4Group(qs + 16 * g, d * static_cast<float>(ls - 32), y + 32 * g);
  }
}

} // namespace

LegacyBlock ggmlLegacyCodes(uint32_t type, const uint8_t* b, uint8_t* codes) {
  LegacyBlock block;
  std::memcpy(&block.scaleBits, b, 2);
  const auto t = static_cast<GgmlType>(type);
  if (t == GgmlType::Q8_0) {
    block.offset = 128;
    for (int j = 0; j < 32; ++j)
      codes[j] = static_cast<uint8_t>(b[2 + j] ^ 0x80); // int8 q -> q + 128
    return block;
  }
  block.hasMin = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
  const bool five = t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
  const uint8_t* p = b + (block.hasMin ? 4 : 2);
  uint32_t qh = 0;
  if (five) {
    std::memcpy(&qh, p, 4); // the fifth bits of the 32 values
    p += 4;
  }
  block.offset = block.hasMin ? 0 : five ? 16 : 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = five ? ((qh >> j) << 4) & 0x10 : 0;
    const int h1 = five ? (qh >> (j + 12)) & 0x10 : 0;
    codes[j] = static_cast<uint8_t>((p[j] & 0x0F) | h0);
    codes[j + 16] = static_cast<uint8_t>((p[j] >> 4) | h1);
  }
  return block;
}

bool canDequantizeGgml(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
  case GgmlType::F32:
  case GgmlType::F16:
  case GgmlType::BF16:
  case GgmlType::Q4_0:
  case GgmlType::Q4_1:
  case GgmlType::Q5_0:
  case GgmlType::Q5_1:
  case GgmlType::Q8_0:
  case GgmlType::Q2_K:
  case GgmlType::Q3_K:
  case GgmlType::Q4_K:
  case GgmlType::Q5_K:
  case GgmlType::Q6_K:
  case GgmlType::IQ4_NL:
  case GgmlType::IQ4_XS:
    return true;
  default:
    return false;
  }
}

void dequantizeGgmlRow(uint32_t type, const uint8_t* src, float* dst, int64_t values) {
  const GgmlTypeTraits traits = ggmlTypeTraits(type);
  const int64_t blocks = values / traits.blockValues;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * traits.blockBytes;
    float* y = dst + i * traits.blockValues;
    switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
      std::memcpy(y, b, 4);
      break;
    case GgmlType::F16:
      *y = half(b);
      break;
    case GgmlType::BF16: {
      uint16_t bits;
      std::memcpy(&bits, b, 2);
      *y = bitsToFloat(static_cast<uint32_t>(bits) << 16);
      break;
    }
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
      legacy(type, b, y);
      break;
    case GgmlType::Q2_K:
      q2_k(b, y);
      break;
    case GgmlType::Q3_K:
      q3_k(b, y);
      break;
    case GgmlType::Q4_K:
      q45_k(b, y, false);
      break;
    case GgmlType::Q5_K:
      q45_k(b, y, true);
      break;
    case GgmlType::Q6_K:
      q6_k(b, y);
      break;
    case GgmlType::IQ4_NL: // d, qs[16]
      iq4Group(b + 2, half(b), y);
      break;
    case GgmlType::IQ4_XS:
      iq4_xs(b, y);
      break;
    default:
      return; // canDequantizeGgml is checked first
    }
  }
}

} // namespace ninfer
