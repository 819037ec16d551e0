#include "PlanQueries.h"

#include "ninfer/KvFormat.h"
#include "ninfer/PlanDType.h"

namespace ninfer {

using plan::BufferKind;
using plan::BufferT;
using plan::DType;
using plan::OpT;

int dtypeBytes(DType dtype) { return static_cast<int>(plainDTypeBytes(dtype)); }

bool isFloatWeightType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

uint64_t kvSlotBytes(DType kvType, const plan::AttentionAttrsT &a) {
  return kvType == DType::Q8_KV
             ? uint64_t(kv::q8CacheBytes(a.context, a.kv_heads, a.head_dim))
             : uint64_t(a.context) * uint64_t(a.kv_heads) * uint64_t(a.head_dim) * 2;
}

bool PlanQueries::aligned16(uint32_t index) const {
  const BufferT &b = buf(index);
  if (b.kind == BufferKind::Tokens || b.kind == BufferKind::Logits)
    return true;
  return b.offset % 16 == 0;
}

bool PlanQueries::overlaps(uint32_t a, uint32_t b) const {
  const BufferT &x = buf(a), &y = buf(b);
  if (a == b)
    return true;
  if (x.kind != y.kind)
    return false;
  if (x.kind == BufferKind::Tokens || x.kind == BufferKind::Logits) // one allocation each
    return true;
  return x.offset < y.offset + y.size_bytes && y.offset < x.offset + x.size_bytes;
}

bool PlanQueries::validBuffers(const OpT &op) const {
  for (const auto *list : {&op.inputs, &op.outputs})
    for (uint32_t b : *list)
      if (b >= queried_.buffers.size() || !queried_.buffers[b])
        return false;
  return true;
}

bool PlanQueries::vecGemv(const OpT &op, uint32_t input) const {
  const plan::LinearAttrsT &a = *op.attrs.AsLinearAttrs();
  const int elemsPer16 = 16 / dtypeBytes(buf(op.inputs[1]).dtype);
  return a.in_features % elemsPer16 == 0 && a.in_features % 4 == 0 && aligned16(input) &&
         aligned16(op.inputs[1]);
}

} // namespace ninfer
