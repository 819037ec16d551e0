#include "MemoryFit.h"

#include "ninfer/KvFormat.h"

#include "llvm/Support/FormatVariadic.h"

#include <vector>

namespace ninfer {

namespace {

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }
double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 20); }

} // namespace

bool hasInt8Kv(const plan::PlanT& plan) {
  for (const auto& buffer : plan.buffers)
    if (buffer && buffer->kind == plan::BufferKind::KvCache && buffer->dtype == plan::DType::Q8_KV)
      return true;
  return false;
}

uint64_t planDeviceBytes(const plan::PlanT& plan) {
  const plan::MemoryPlanT& m = *plan.memory;
  return m.weight_bytes + m.kv_bytes + m.activation_bytes + m.workspace_bytes +
         kRuntimeReserveBytes;
}

std::string memoryFitError(const plan::PlanT& plan, const Target& target) {
  const uint64_t total = planDeviceBytes(plan);
  if (target.vramBytes == 0 || total <= target.vramBytes)
    return "";
  const plan::MemoryPlanT& memory = *plan.memory;
  std::string message = llvm::formatv("the plan needs {0:F2} GiB but {1} has {2:F2} GiB",
                                      gib(total), target.name, gib(target.vramBytes));
  // What would make it fit, each alone.
  std::vector<std::string> fixes;
  const uint64_t withoutKv = total - memory.kv_bytes;
  if (withoutKv < target.vramBytes && plan.context > 0 && memory.kv_bytes > 0) {
    const double kvPerPosition = static_cast<double>(memory.kv_bytes) / plan.context;
    const auto context = static_cast<long long>((target.vramBytes - withoutKv) / kvPerPosition);
    if (context > 0)
      fixes.push_back(llvm::formatv("lower --ctx to at most {0}", context).str());
    if (!hasInt8Kv(plan) && plan.model) {
      const long long positions = plan.context, heads = plan.model->kv_heads,
                      headDim = plan.model->head_dim;
      const double fp16Bytes = 2.0 * positions * heads * headDim;
      const double int8Kv =
          fp16Bytes > 0
              ? memory.kv_bytes * (kv::q8CacheBytes(positions, heads, headDim) / fp16Bytes)
              : 0.0;
      if (int8Kv > 0 && withoutKv + int8Kv <= target.vramBytes)
        fixes.push_back(llvm::formatv("--kv-dtype int8 (KV cache {0:F0} -> about {1:F0} MiB)",
                                      mib(memory.kv_bytes), int8Kv / (1 << 20)));
    }
  }
  const uint64_t parameters = plan.model ? plan.model->parameters : 0;
  const double bits = parameters ? 8.0 * memory.weight_bytes / parameters : 0.0;
  if (bits > 12.0) { // 16-bit weights; q4_g64 takes 4.25 bits a weight
    const double q4Weights = memory.weight_bytes * 4.25 / bits;
    if (total - memory.weight_bytes + q4Weights <= target.vramBytes)
      fixes.push_back(llvm::formatv("--quant q4 (weights {0:F2} -> about {1:F2} GiB)",
                                    gib(memory.weight_bytes), q4Weights / (1ull << 30)));
  }
  if (withoutKv >= target.vramBytes && fixes.empty())
    message += ": the weights alone do not fit";
  for (size_t i = 0; i < fixes.size(); ++i)
    message += (i == 0 ? ": " : ", or ") + fixes[i];
  return message;
}

} // namespace ninfer
