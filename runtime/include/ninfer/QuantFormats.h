// Packed layouts of the group-wise quantized weight formats (Q8, Q6, Q5, Q4, Q3,
// Q2 with an fp16 scale per group of 32, 64 or 128 values; Q4, Q3, Q2 with
// two-level "K16" scales per group of 16), shared by the packer in the
// compiler (passes/quant), the device kernels and the CPU executor, so the three
// can never disagree. Compiles as host C++ and as NVRTC device code: no standard
// header is included (fp16 conversion: HalfFloat.h).
//
// Values. A weight w of group g is stored as an unsigned code c in [0, 2^b) and
// reads back as  w' = scale[g] * (c - 2^(b-1)),  i.e. q = c - 2^(b-1) in
// [-2^(b-1), 2^(b-1) - 1]. Symmetric (no zero point), but the whole two's
// complement range is used; the scale is signed, so the quantizer decides which
// side of zero gets the extra level (Q2: {-2, -1, 0, 1} * scale, four levels
// instead of three).
//
// Layout of a tensor W [rows, cols] (cols a multiple of 128, row-major like the
// checkpoint: one row per output feature):
//
//   [weight plane: rows x rowWeightBytes(cols)][scale plane: rows x (cols/G) fp16]
//
// * Weight plane: each row is a run of 128-value units; a unit takes exactly
//   `bits` 16-byte words (Q8 128 B, Q6 96 B, Q5 80 B, Q4 64 B, Q3 48 B, Q2
//   32 B), little-endian
//   u32 words. So every row starts 16-byte aligned and a GEMV warp streams a row
//   with coalesced 16-byte loads whatever the format.
// * Scale plane: the fp16 scales of row r are contiguous at
//   scalePlaneOffset + r * (cols/G) * 2. The scales of one unit (128/G of them)
//   are 8, 4 or 2 contiguous, naturally aligned bytes: one load per unit.
// Why two planes and not scales interleaved with the weights: interleaving 2-byte
// scales breaks the 16-byte alignment of the weight words (e.g. Q4/G128: 64 + 2
// bytes) unless padded, and padding would break the exact size. With the planes
// a tensor is exactly rows * cols * (bits + 16/G) / 8 bytes, no padding, and the
// scale plane starts 16-byte aligned because every weight row is a multiple of
// 16 bytes.
//
// Bit order inside a unit (value i of the unit, 0 <= i < 128):
// * Q8: byte i (word i/4, bits 8*(i%4)).
// * Q4: word i/8, bits 4*(i%8).          16-byte word j holds values 32j..32j+31.
// * Q2: word i/16, bits 2*(i%16).        16-byte word j holds values 64j..64j+63.
// * Q3: a 2-bit plane then a 1-bit plane: words 0..7 hold the low two bits of
//   value i at word i/16, bits 2*(i%16) (the Q2 layout); words 8..11 hold bit 2
//   of value i at word 8 + i/32, bit i%32. 128 values in 12 words = 3 bits each,
//   and both planes decode with a shift and a mask, no field straddles a word.
// * Q6: a 4-bit plane then a 2-bit plane: words 0..15 hold the low four bits of
//   value i in the Q4 layout; words 16..23 hold bits 4-5 of value i at word
//   16 + i/16, bits 2*(i%16) (the Q2 layout).
// * Q5: a 4-bit plane then a 1-bit plane: words 0..15 as Q6; words 16..19 hold
//   bit 4 of value i at word 16 + i/32, bit i%32 (Q3's high plane).
// Fields are in value order; a kernel that wants the two-halves-at-once trick
// ((w >> s) & 0x000F000F) gets values i and i+4 of a Q4 word and pairs x to match.
//
// K16 formats (q4_k16, q3_k16, q2_k16; "group size" 16 in the traits): the weight
// plane is the Q4/Q3/Q2 one; the scale plane holds one 8-byte record per
// 128-value unit, the same bytes as fp16 scales per 32 values (bits + 0.5 per
// weight), but eight groups of 16 values each get their own scale, as in
// llama.cpp's K-quants. Record (little-endian u64): bits 0..15 an fp16 unit
// scale d, bits 16 + 6j .. 21 + 6j a signed 6-bit sub-scale s_j (-32..31) of
// group j of the unit. Group j's scale is fp16(d * s_j): the product is exact in
// f32 (11 x 6 significant bits) and rounded once to fp16, so every reader gets
// the same fp16 scale and decodes as the fp16-scale formats do.
#pragma once

#include "DummyFill.h" // dummyHash
#include "HalfFloat.h"
#include "HostDevice.h"

namespace ninfer {
namespace quant {

// ---- Format identities (values are stored in plans: never renumber) ----

enum class QuantFormatId : unsigned char {
  Q8G32 = 0,
  Q8G64 = 1,
  Q8G128 = 2,
  Q4G32 = 3,
  Q4G64 = 4,
  Q4G128 = 5,
  Q3G32 = 6,
  Q3G64 = 7,
  Q3G128 = 8,
  Q2G32 = 9,
  Q2G64 = 10,
  Q2G128 = 11,
  Q6G32 = 12,
  Q6G64 = 13,
  Q6G128 = 14,
  Q5G32 = 15,
  Q5G64 = 16,
  Q5G128 = 17,
  Q2K16 = 18,
  Q3K16 = 19,
  Q4K16 = 20,
};
constexpr int kQuantFormatCount = 21;

// The group size that marks the two-level K16 scales (see the top of this file).
constexpr int kQuantK16Group = 16;

// Every format packs values in units of 128 (one Q3 unit is 12 u32 words).
constexpr int kQuantUnitValues = 128;

struct QuantFormatTraits {
  const char* name;  // "q4_g64"
  int bits;          // per weight, without the scale
  int groupSize;     // values sharing one scale (16: K16 two-level scales)
  int bytesPerGroup; // weights + scale (K16: + 1, its share of the unit's record)
};

NINFER_HD constexpr bool isQuantBits(int bits) {
  return bits == 8 || bits == 6 || bits == 5 || bits == 4 || bits == 3 || bits == 2;
}
NINFER_HD constexpr bool isQuantGroupSize(int group) {
  return group == 32 || group == 64 || group == 128;
}
// Group sizes of some format: the fp16-scale ones and K16.
NINFER_HD constexpr bool isQuantFormatGroup(int group) {
  return isQuantGroupSize(group) || group == kQuantK16Group;
}

// Traits by id; an id outside the enum gives bits = 0 and name "invalid".
NINFER_HD constexpr QuantFormatTraits quantFormatTraits(QuantFormatId id) {
  switch (id) {
  case QuantFormatId::Q8G32:
    return {"q8_g32", 8, 32, 8 * 32 / 8 + 2};
  case QuantFormatId::Q8G64:
    return {"q8_g64", 8, 64, 8 * 64 / 8 + 2};
  case QuantFormatId::Q8G128:
    return {"q8_g128", 8, 128, 8 * 128 / 8 + 2};
  case QuantFormatId::Q4G32:
    return {"q4_g32", 4, 32, 4 * 32 / 8 + 2};
  case QuantFormatId::Q4G64:
    return {"q4_g64", 4, 64, 4 * 64 / 8 + 2};
  case QuantFormatId::Q4G128:
    return {"q4_g128", 4, 128, 4 * 128 / 8 + 2};
  case QuantFormatId::Q3G32:
    return {"q3_g32", 3, 32, 3 * 32 / 8 + 2};
  case QuantFormatId::Q3G64:
    return {"q3_g64", 3, 64, 3 * 64 / 8 + 2};
  case QuantFormatId::Q3G128:
    return {"q3_g128", 3, 128, 3 * 128 / 8 + 2};
  case QuantFormatId::Q2G32:
    return {"q2_g32", 2, 32, 2 * 32 / 8 + 2};
  case QuantFormatId::Q2G64:
    return {"q2_g64", 2, 64, 2 * 64 / 8 + 2};
  case QuantFormatId::Q2G128:
    return {"q2_g128", 2, 128, 2 * 128 / 8 + 2};
  case QuantFormatId::Q6G32:
    return {"q6_g32", 6, 32, 6 * 32 / 8 + 2};
  case QuantFormatId::Q6G64:
    return {"q6_g64", 6, 64, 6 * 64 / 8 + 2};
  case QuantFormatId::Q6G128:
    return {"q6_g128", 6, 128, 6 * 128 / 8 + 2};
  case QuantFormatId::Q5G32:
    return {"q5_g32", 5, 32, 5 * 32 / 8 + 2};
  case QuantFormatId::Q5G64:
    return {"q5_g64", 5, 64, 5 * 64 / 8 + 2};
  case QuantFormatId::Q5G128:
    return {"q5_g128", 5, 128, 5 * 128 / 8 + 2};
  case QuantFormatId::Q2K16:
    return {"q2_k16", 2, 16, 2 * 16 / 8 + 1};
  case QuantFormatId::Q3K16:
    return {"q3_k16", 3, 16, 3 * 16 / 8 + 1};
  case QuantFormatId::Q4K16:
    return {"q4_k16", 4, 16, 4 * 16 / 8 + 1};
  }
  return {"invalid", 0, 0, 0};
}

// The id of (bits, group size), or -1 when there is no such format.
NINFER_HD constexpr int quantFormatIndex(int bits, int group) {
  if (group == kQuantK16Group) // K16: 2, 3, 4 after the fp16-scale formats
    return bits >= 2 && bits <= 4 ? static_cast<int>(QuantFormatId::Q2K16) + bits - 2 : -1;
  // Ids in the order the formats were added: 8, 4, 3, 2, then 6, 5.
  const int bitsIndex = bits == 8   ? 0
                        : bits == 4 ? 1
                        : bits == 3 ? 2
                        : bits == 2 ? 3
                        : bits == 6 ? 4
                        : bits == 5 ? 5
                                    : -1;
  const int groupIndex = group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : -1;
  return (bitsIndex < 0 || groupIndex < 0) ? -1 : bitsIndex * 3 + groupIndex;
}

// Size rules that do not need the format as a template parameter (host packer,
// plan writer, loader checks). cols must be a multiple of kQuantUnitValues.
NINFER_HD constexpr bool isQuantizableCols(long long cols) {
  return cols > 0 && cols % kQuantUnitValues == 0;
}
NINFER_HD constexpr long long quantRowWeightBytes(int bits, long long cols) {
  return cols / kQuantUnitValues * 16 * bits;
}
NINFER_HD constexpr long long quantRowScaleBytes(int group, long long cols) {
  return group == kQuantK16Group ? cols / kQuantUnitValues * 8 : cols / group * 2;
}
NINFER_HD constexpr long long quantScalePlaneOffset(int bits, long long rows, long long cols) {
  return rows * quantRowWeightBytes(bits, cols);
}
NINFER_HD constexpr long long quantTensorBytes(int bits, int group, long long rows,
                                               long long cols) {
  return rows * (quantRowWeightBytes(bits, cols) + quantRowScaleBytes(group, cols));
}

// ---- Packing of one 128-value unit, by bit width ----

// The unit as a plain struct, so its size is checked where it is declared.
template <int Bits> struct QuantUnit { unsigned int words[4 * Bits]; };
static_assert(sizeof(QuantUnit<8>) == 128, "Q8 unit: 128 values in 128 bytes");
static_assert(sizeof(QuantUnit<6>) == 96, "Q6 unit: 128 values in 96 bytes");
static_assert(sizeof(QuantUnit<5>) == 80, "Q5 unit: 128 values in 80 bytes");
static_assert(sizeof(QuantUnit<4>) == 64, "Q4 unit: 128 values in 64 bytes");
static_assert(sizeof(QuantUnit<3>) == 48, "Q3 unit: 128 values in 48 bytes");
static_assert(sizeof(QuantUnit<2>) == 32, "Q2 unit: 128 values in 32 bytes");

template <int Bits> struct QuantPacking {
  static_assert(Bits == 8 || Bits == 6 || Bits == 5 || Bits == 4 || Bits == 3 || Bits == 2,
                "unsupported bit width");
  static constexpr int kBits = Bits;
  static constexpr int kUnitWords = 4 * Bits;
  static constexpr int kUnitBytes = 16 * Bits;
  static constexpr unsigned int kCodeMask = (1u << Bits) - 1u;
  static constexpr int kCodeOffset = 1 << (Bits - 1); // code of q = 0
  static constexpr int kQMin = -kCodeOffset;
  static constexpr int kQMax = kCodeOffset - 1;
  // Widths of the two planes (kHighBits = 0: one plane). The low plane takes
  // words 0 .. 4 * kLowBits - 1, the high plane the rest.
  static constexpr int kLowBits = Bits == 3 ? 2 : (Bits == 5 || Bits == 6) ? 4 : Bits;
  static constexpr int kHighBits = Bits - kLowBits;

  // codes[0..127] (each < 2^Bits; higher bits are ignored) -> words[kUnitWords].
  NINFER_HD static void packUnit(const unsigned char* codes, unsigned int* words) {
    for (int w = 0; w < kUnitWords; ++w)
      words[w] = 0;
    constexpr int kLowPerWord = 32 / kLowBits;
    for (int i = 0; i < 128; ++i) {
      const unsigned int c = codes[i] & kCodeMask;
      words[i / kLowPerWord] |= (c & ((1u << kLowBits) - 1u)) << (kLowBits * (i % kLowPerWord));
      if constexpr (kHighBits > 0) {
        constexpr int kHighPerWord = 32 / kHighBits;
        words[4 * kLowBits + i / kHighPerWord] |= (c >> kLowBits)
                                                  << (kHighBits * (i % kHighPerWord));
      }
    }
  }

  // Code of value i (0..127) of the unit starting at `unit`.
  NINFER_HD static unsigned int codeInUnit(const unsigned int* unit, int i) {
    constexpr int kLowPerWord = 32 / kLowBits;
    const unsigned int low =
        (unit[i / kLowPerWord] >> (kLowBits * (i % kLowPerWord))) & ((1u << kLowBits) - 1u);
    if constexpr (kHighBits > 0) {
      constexpr int kHighPerWord = 32 / kHighBits;
      const unsigned int high =
          (unit[4 * kLowBits + i / kHighPerWord] >> (kHighBits * (i % kHighPerWord))) &
          ((1u << kHighBits) - 1u);
      return low | (high << kLowBits);
    } else {
      return low;
    }
  }

  NINFER_HD static void unpackUnit(const unsigned int* words, unsigned char* codes) {
    for (int i = 0; i < 128; ++i)
      codes[i] = static_cast<unsigned char>(codeInUnit(words, i));
  }

  // Code of column k of a row whose weight words start at `rowWords`.
  NINFER_HD static unsigned int codeAt(const unsigned int* rowWords, long long k) {
    return codeInUnit(rowWords + (k >> 7) * kUnitWords, static_cast<int>(k & 127));
  }
};

// Code of column k of a row of a format with `bits` bits (one of isQuantBits),
// for code that picks the format at run time (CPU executor, tests).
NINFER_HD inline unsigned int quantCodeAt(int bits, const unsigned int* rowWords, long long k) {
  switch (bits) {
  case 8:
    return QuantPacking<8>::codeAt(rowWords, k);
  case 6:
    return QuantPacking<6>::codeAt(rowWords, k);
  case 5:
    return QuantPacking<5>::codeAt(rowWords, k);
  case 4:
    return QuantPacking<4>::codeAt(rowWords, k);
  case 3:
    return QuantPacking<3>::codeAt(rowWords, k);
  default:
    return QuantPacking<2>::codeAt(rowWords, k);
  }
}

// ---- K16 scale records ----

// Sub-scale j (0..7) of a unit's record, as a signed integer in [-32, 31].
NINFER_HD inline int k16SubScale(const unsigned short* record, int j) {
  const unsigned long long subs = static_cast<unsigned long long>(record[1]) |
                                  (static_cast<unsigned long long>(record[2]) << 16) |
                                  (static_cast<unsigned long long>(record[3]) << 32);
  const int field = static_cast<int>((subs >> (6 * j)) & 0x3Fu);
  return field >= 32 ? field - 64 : field;
}

// fp16 bits of d * s (d fp16 bits, s a sub-scale): the K16 group scale.
NINFER_HD inline unsigned short k16Scale(unsigned short unitScale, int subScale) {
  return floatToHalfBits(halfBitsToFloat(unitScale) * static_cast<float>(subScale));
}

// Writes a record: unit scale d and sub-scales subs[0..7] (each in [-32, 31]).
NINFER_HD inline void setK16Record(unsigned short* record, unsigned short unitScale,
                                   const int* subs) {
  unsigned long long bits = 0;
  for (int j = 0; j < 8; ++j)
    bits |= static_cast<unsigned long long>(subs[j] & 0x3F) << (6 * j);
  record[0] = unitScale;
  record[1] = static_cast<unsigned short>(bits);
  record[2] = static_cast<unsigned short>(bits >> 16);
  record[3] = static_cast<unsigned short>(bits >> 32);
}

// fp16 bits of the scale of group `group` of a row whose scale plane starts at
// `rowScales`, for any group size (K16 included).
template <int Group>
NINFER_HD inline unsigned short quantGroupScaleBits(const unsigned short* rowScales,
                                                    long long group) {
  if constexpr (Group == kQuantK16Group) {
    const unsigned short* record = rowScales + (group >> 3) * 4;
    return k16Scale(record[0], k16SubScale(record, static_cast<int>(group & 7)));
  } else {
    return rowScales[group];
  }
}

// The same with the group size known at run time (CPU executor, tests).
NINFER_HD inline unsigned short
quantGroupScaleBitsOf(int groupSize, const unsigned short* rowScales, long long group) {
  return groupSize == kQuantK16Group ? quantGroupScaleBits<kQuantK16Group>(rowScales, group)
                                     : rowScales[group];
}

// ---- A full format: bit width and group size ----

template <int Bits, int Group> struct QuantFormat : QuantPacking<Bits> {
  static_assert(Group == 32 || Group == 64 || Group == 128 ||
                    (Group == kQuantK16Group && Bits >= 2 && Bits <= 4),
                "unsupported group size");
  using Packing = QuantPacking<Bits>;
  static constexpr int kGroup = Group;
  static constexpr int kGroupsPerUnit = kQuantUnitValues / Group;
  static constexpr int kGroupWeightBytes = Bits * Group / 8;
  static constexpr int kGroupBytes = kGroupWeightBytes + (Group == kQuantK16Group ? 1 : 2);
  static constexpr QuantFormatId kId = static_cast<QuantFormatId>(quantFormatIndex(Bits, Group));

  NINFER_HD static constexpr long long rowWeightBytes(long long cols) {
    return quantRowWeightBytes(Bits, cols);
  }
  NINFER_HD static constexpr long long rowScaleBytes(long long cols) {
    return quantRowScaleBytes(Group, cols);
  }
  NINFER_HD static constexpr long long tensorBytes(long long rows, long long cols) {
    return quantTensorBytes(Bits, Group, rows, cols);
  }

  // Dequantizes group `group` of a row: rowWords = start of the row in the weight
  // plane, rowScales = start of the row in the scale plane.
  NINFER_HD static void dequantizeGroup(const unsigned int* rowWords,
                                        const unsigned short* rowScales, long long group,
                                        float* out) {
    const float scale = halfBitsToFloat(quantGroupScaleBits<Group>(rowScales, group));
    const long long first = group * Group;
    for (int i = 0; i < Group; ++i) {
      const int q = static_cast<int>(Packing::codeAt(rowWords, first + i)) - Packing::kCodeOffset;
      out[i] = scale * static_cast<float>(q);
    }
  }
};

// Every (bits, group) pair: the traits table agrees with the templates and the
// size is exactly bits + 16 / group bits per weight.
#define NINFER_QUANT_CHECK_FORMAT(B, G)                                                            \
  static_assert(quantFormatTraits(QuantFormat<B, G>::kId).bits == B, "traits bits");               \
  static_assert(quantFormatTraits(QuantFormat<B, G>::kId).groupSize == G, "traits group");         \
  static_assert(quantFormatTraits(QuantFormat<B, G>::kId).bytesPerGroup ==                         \
                    QuantFormat<B, G>::kGroupBytes,                                                \
                "traits bytes per group");                                                         \
  static_assert(QuantFormat<B, G>::tensorBytes(3, 1024) * 8 ==                                     \
                    3 * 1024 * (B * G + (G == kQuantK16Group ? 8 : 16)) / G,                       \
                "exact bits per weight");                                                          \
  static_assert(QuantFormat<B, G>::rowWeightBytes(1024) % 16 == 0, "16-byte aligned rows");
NINFER_QUANT_CHECK_FORMAT(8, 32)
NINFER_QUANT_CHECK_FORMAT(8, 64)
NINFER_QUANT_CHECK_FORMAT(8, 128)
NINFER_QUANT_CHECK_FORMAT(4, 32)
NINFER_QUANT_CHECK_FORMAT(4, 64)
NINFER_QUANT_CHECK_FORMAT(4, 128)
NINFER_QUANT_CHECK_FORMAT(3, 32)
NINFER_QUANT_CHECK_FORMAT(3, 64)
NINFER_QUANT_CHECK_FORMAT(3, 128)
NINFER_QUANT_CHECK_FORMAT(2, 32)
NINFER_QUANT_CHECK_FORMAT(2, 64)
NINFER_QUANT_CHECK_FORMAT(2, 128)
NINFER_QUANT_CHECK_FORMAT(6, 32)
NINFER_QUANT_CHECK_FORMAT(6, 64)
NINFER_QUANT_CHECK_FORMAT(6, 128)
NINFER_QUANT_CHECK_FORMAT(5, 32)
NINFER_QUANT_CHECK_FORMAT(5, 64)
NINFER_QUANT_CHECK_FORMAT(5, 128)
NINFER_QUANT_CHECK_FORMAT(2, 16)
NINFER_QUANT_CHECK_FORMAT(3, 16)
NINFER_QUANT_CHECK_FORMAT(4, 16)
#undef NINFER_QUANT_CHECK_FORMAT

// ---- Dummy weights (--dummy-weights --quant qN plans) ----
//
// The executors fill a quantized buffer of size_bytes = 2 * units in 16-bit
// units: unit u of the weight plane is half u % 2 (low half first) of the
// pseudo-random 32-bit word dummyHash(seed, u / 2) (every code pattern is a
// valid value), every unit of the scale plane is the fp16 value of
// dummyGroupScale(bits, scale) (K16: records of that unit scale and sub-scales
// 1), so dequantized values lie in [-scale, scale).
// The CUDA fill kernel and the CPU executor both call dummyUnit(), so both
// executors hold the same bytes. The weight plane's size follows from the
// buffer size alone: size_bytes = groups * (bits * G / 8 + 2) (K16: + 1).
NINFER_HD inline float dummyGroupScale(int bits, float scale) {
  return scale / static_cast<float>(1 << (bits - 1));
}

// Unit `unit` of a dummy buffer of format `formatId` and `units` 16-bit units.
NINFER_HD inline unsigned short dummyUnit(int formatId, unsigned int seed, unsigned long long unit,
                                          unsigned long long units, float scale) {
  const QuantFormatTraits traits = quantFormatTraits(static_cast<QuantFormatId>(formatId));
  const int bits = traits.bits;
  const int group = traits.groupSize;
  const unsigned long long groupWeightBytes = static_cast<unsigned long long>(bits * group / 8);
  const unsigned long long groupScaleBytes = group == kQuantK16Group ? 1ull : 2ull;
  const unsigned long long groups = 2ull * units / (groupWeightBytes + groupScaleBytes);
  const unsigned long long weightUnits = groups * groupWeightBytes / 2ull;
  if (unit >= weightUnits && group == kQuantK16Group) {
    // Records of d = the dummy scale and every sub-scale 1 (6-bit fields 000001).
    const unsigned long long field = (unit - weightUnits) & 3ull;
    return field == 0 ? floatToHalfBits(dummyGroupScale(bits, scale))
                      : static_cast<unsigned short>(0x041041041041ull >> (16 * (field - 1)));
  }
  if (unit >= weightUnits)
    return floatToHalfBits(dummyGroupScale(bits, scale));
  const unsigned int word = static_cast<unsigned int>(dummyHash(seed, unit >> 1));
  return static_cast<unsigned short>((unit & 1ull) ? (word >> 16) : (word & 0xFFFFu));
}

} // namespace quant
} // namespace ninfer
