#include "CpuMemory.h"

#include "plan_generated.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

namespace ninfer {

CpuMemoryNeed cpuExecutorMemory(const PlanFile& file) {
  const plan::Plan& p = file.plan();
  CpuMemoryNeed need;
  uint64_t activationEnd = 0, kvEnd = 0, packedMost = 0;
  for (const plan::Buffer* b : *p.buffers()) {
    switch (b->kind()) {
    case plan::BufferKind::Activation:
      activationEnd = std::max(activationEnd, b->offset() + b->size_bytes());
      break;
    case plan::BufferKind::KvCache:
      kvEnd = std::max(kvEnd, b->offset() + b->size_bytes());
      break;
    case plan::BufferKind::Weight: {
      if (b->dtype() == plan::DType::I32 || (b->dtype() == plan::DType::F32 && !b->dummy()))
        break; // used in place
      uint64_t elements = 1;
      for (int64_t extent : *b->shape())
        elements *= uint64_t(std::max<int64_t>(extent, 0));
      need.weightBytes += 4 * elements;
      // Dummy quantized weights are generated packed first, one buffer at a time.
      if (b->dummy())
        packedMost = std::max(packedMost, b->size_bytes());
      break;
    }
    default:
      break;
    }
  }
  uint64_t decodedKv = 0; // an attention op's f16 K and V rows as f32
  for (const plan::Op* op : *p.ops())
    if (const auto* a = op->attrs_as_AttentionAttrs())
      decodedKv = std::max(decodedKv, 2 * uint64_t(a->context()) * uint64_t(a->kv_heads()) *
                                          uint64_t(a->head_dim()) * 4);
  const uint64_t logits = uint64_t(p.max_batch()) * uint64_t(p.model()->vocab_size()) * 4;
  need.totalBytes = need.weightBytes + packedMost + activationEnd + kvEnd + logits + decodedKv;
  return need;
}

uint64_t availableHostMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

Status checkCpuMemory(const CpuMemoryNeed& need, uint64_t availableBytes) {
  if (availableBytes == 0 || need.totalBytes <= availableBytes)
    return Status::ok();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  char text[256];
  std::snprintf(text, sizeof text,
                "the CPU executor needs %.1f GiB for this plan (its weights as f32: %.1f GiB) and "
                "the machine has %.1f GiB available",
                double(need.totalBytes) / gib, double(need.weightBytes) / gib,
                double(availableBytes) / gib);
  return Status::error(text);
}

} // namespace ninfer
