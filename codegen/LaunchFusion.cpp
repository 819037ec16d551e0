#include "LaunchFusion.h"

#include "ninfer/GemvShapes.h"
#include "ninfer/QuantDType.h"
#include "ninfer/QuantFormats.h"
#include "ninfer/StepAbi.h"
#include "ninfer/TernaryDType.h"

#include <algorithm>

namespace ninfer {
namespace {

using plan::BufferKind;
using plan::BufferT;
using plan::DType;
using plan::OpT;

class FusionSearch : PlanQueries {
public:
  FusionSearch(const plan::PlanT &plan, const FusionChoices &choices)
      : PlanQueries(plan), plan_(plan), choices_(choices) {}

  LaunchFusions run() {
    findLinearGroups();
    findRopeAppends();
    findSwiGluFusions();
    findSwiGluGemms();
    findNormFusions();
    findProducerRounds();
    return std::move(out_);
  }

private:
  // Whether an op from `begin` on reads `buffer` before one writes it again (an op with
  // missing buffers counts as a reader).
  bool readFrom(size_t begin, uint32_t buffer) const {
    for (size_t j = begin; j < plan_.ops.size(); ++j) {
      const OpT &op = *plan_.ops[j];
      if (!validBuffers(op))
        return true;
      for (uint32_t b : op.inputs)
        if (overlaps(b, buffer))
          return true;
      for (uint32_t b : op.outputs)
        if (overlaps(b, buffer))
          return false;
    }
    return false;
  }

  // Op index -> its group. A group needs GEMM launches for its members (so plans
  // whose steps never exceed the GEMV rows are not grouped), one GEMV kind (one
  // launch bound), room in the kernel ABI, and outputs that overlap neither the
  // input nor each other (the members run at the same time).
  void findLinearGroups() {
    const size_t n = plan_.ops.size();
    out_.linearGroups.assign(n, LinearGroup{});
    for (size_t i = 0; i < n; ++i)
      out_.linearGroups[i].head = i;
    if (!choices_.fuseLaunches || maxRows() <= kLinearGemvRows)
      return;
    for (size_t i = 0; i < n; ++i) {
      if (!groupable(*plan_.ops[i]))
        continue;
      const OpT &first = *plan_.ops[i];
      size_t args = 1, end = i;
      std::vector<uint32_t> outputs;
      while (end < n && end - i < kMaxLinearGroup && groupable(*plan_.ops[end])) {
        const OpT &op = *plan_.ops[end];
        const size_t opArgs = op.inputs.size(); // weights, bias?, output
        bool clash = op.inputs[0] != first.inputs[0] ||
                     gemvKind(op) != gemvKind(first) || args + opArgs > size_t(kMaxKernelArgs) ||
                     overlaps(op.outputs[0], first.inputs[0]);
        for (uint32_t out : outputs)
          clash = clash || overlaps(op.outputs[0], out);
        if (clash)
          break;
        args += opArgs;
        outputs.push_back(op.outputs[0]);
        ++end;
      }
      if (end - i < 2)
        continue;
      for (size_t m = i; m < end; ++m)
        out_.linearGroups[m] = {i, end - i};
      i = end - 1;
    }
  }

  // A SwiGLU op right after the gate/up group whose outputs it reads: the group's
  // decode launch computes the activation itself (linearSwiGlu, linearQuantSwiGlu,
  // linearTq1SwiGlu) and writes neither gate nor up; the SwiGLU launch runs the longer steps.
  // It needs both linears without bias, one weight dtype, the 16-byte f16/bf16 GEMV or a
  // group-quantized or TQ1 format with sm_80+ targets (the tensor-core GEMVs), and an
  // activation that does not overlap the input (the launch reads x while it writes), and no
  // op after the SwiGLU that reads gate or up (the fused launches write neither).
  // In plans of several sequences only where the group's steps of 2..8 rows take the
  // multi-row kernel (rowsTakeSwiGlu): with the register-fed SwiGLU GEMV the 8B q4 batch
  // plan's 8-row steps went from 4.41 to 4.67 ms on the H200 (its one-row steps gained
  // 5.8%); not investigated.
  void findSwiGluFusions() {
    const size_t n = plan_.ops.size();
    out_.swiGluOfGroup.assign(n, -1);
    out_.swiGluFused.assign(n, false);
    for (size_t i = 0; i + 2 < n; ++i) {
      const LinearGroup &group = out_.linearGroups[i];
      const OpT &first = *plan_.ops[i], &second = *plan_.ops[i + 1], &act = *plan_.ops[i + 2];
      const plan::SwiGluAttrsT *sw = act.attrs.AsSwiGluAttrs();
      if (group.head != i || group.size != 2 || !sw || act.inputs.size() != 2 ||
          act.outputs.size() != 1)
        continue;
      const plan::LinearAttrsT &a = *first.attrs.AsLinearAttrs();
      const plan::LinearAttrsT &b = *second.attrs.AsLinearAttrs();
      const bool pair = (act.inputs[0] == first.outputs[0] && act.inputs[1] == second.outputs[0]) ||
                        (act.inputs[0] == second.outputs[0] && act.inputs[1] == first.outputs[0]);
      const DType wType = buf(first.inputs[1]).dtype;
      const bool quantized = quant::formatOfPlanDType(int(wType)) >= 0;
      const bool halves = (wType == DType::F16 || wType == DType::BF16) &&
                          a.in_features % (16 / dtypeBytes(wType)) == 0 &&
                          aligned16(first.inputs[1]) && aligned16(second.inputs[1]);
      const bool tensorCoreGemv = quantized || wType == DType::TQ1;
      if (!pair || a.has_bias || b.has_bias || sw->dim != a.out_features ||
          b.out_features != a.out_features || buf(second.inputs[1]).dtype != wType ||
          !aligned16(first.inputs[0]) || !(halves || (tensorCoreGemv && choices_.tensorCoreGemm)) ||
          overlaps(act.outputs[0], first.inputs[0]) || readFrom(i + 3, first.outputs[0]) ||
          readFrom(i + 3, second.outputs[0]) || (maxBatch() > 1 && !rowsTakeSwiGlu(first)))
        continue;
      out_.swiGluOfGroup[i] = static_cast<int>(i + 2);
      out_.swiGluFused[i + 2] = true;
    }
  }

  // Whether the steps of 2..8 rows of the gate/up pair of `gate`'s shape take the multi-row
  // kernel with the SwiGLU (KernelEmitter.cpp's swiGluRowsCall: both members have its
  // launch, describeLinearQuant, and the pair's 16-row tiles pay, rowsPays).
  bool rowsTakeSwiGlu(const OpT &gate) const {
    const int format = quant::formatOfPlanDType(int(buf(gate.inputs[1]).dtype));
    if (format < 0 || !choices_.bulkGemv)
      return false;
    const quant::QuantFormatTraits traits =
        quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
    const plan::LinearAttrsT &a = *gate.attrs.AsLinearAttrs();
    const int k = int(a.in_features), n = int(a.out_features);
    return gemv::bulkLayout(traits.bits, traits.groupSize, k, n, false, choices_.deepBulkRing)
               .fits &&
           gemv::bulkRowsLayout(traits.bits, traits.groupSize, k, n).fits &&
           gemv::rowsPays(traits.bits, k, 2 * n / gemv::kBulkTileRows);
  }

  // A fused SwiGLU (above) whose gate/up GEMM runs on wgmma (sm_90a targets) and whose
  // activation (a multiple of 64 wide) only the next op reads: a linear whose GEMM runs on
  // wgmma too (not grouped). In long steps the gate/up GEMM runs over tiles of 64 gate and
  // the same 64 up rows, and its epilogue writes silu(gate) * up, rounded to the down
  // projection's 16-bit x type, for the down GEMM to read: no SwiGLU launch and no rounding
  // launch, and neither gate, up nor the activation is written in f32. (KernelEmitter.cpp's
  // addGemm takes the same wgmma path; it refuses the plan where it would not.)
  void findSwiGluGemms() {
    const size_t n = plan_.ops.size();
    out_.swiGluGemmType.assign(n, 0);
    out_.swiGluGemmOf.assign(n, -1);
    if (!choices_.wgmmaGemm || !choices_.tensorCoreGemm || maxRows() <= kLinearGemvRows)
      return;
    for (size_t s = 2; s + 1 < n; ++s) {
      const OpT &act = *plan_.ops[s], &down = *plan_.ops[s + 1];
      const int type = wgmmaInputType(s + 1);
      if (!out_.swiGluFused[s] || type == 0 || wgmmaInputType(s - 2) == 0 ||
          wgmmaInputType(s - 1) != wgmmaInputType(s - 2) ||
          act.attrs.AsSwiGluAttrs()->dim % 64 != 0 || down.inputs[0] != act.outputs[0] ||
          out_.linearGroups[s + 1].size > 1)
        continue;
      const uint32_t activation = act.outputs[0];
      bool otherReader = readFrom(s + 2, activation);
      for (size_t k = 1; k < down.inputs.size(); ++k)
        otherReader = otherReader || overlaps(down.inputs[k], activation);
      if (otherReader)
        continue;
      out_.swiGluGemmType[s] = type;
      out_.swiGluGemmOf[s + 1] = static_cast<int>(s);
    }
  }

  // An RMSNorm over whole rows whose output only linear ops read (until it is written
  // again), before its input changes, each of which has launches that can normalize x
  // themselves (normRows): those launches read the norm's input instead (linear.cuh's
  // GEMV, gemv_quant_bulk.cuh), and the norm's own launch runs only the longer steps
  // (none when the readers cover every step, like the lm_head's): a launch less per norm
  // in decode steps, two per layer.
  void findNormFusions() {
    const size_t n = plan_.ops.size();
    out_.normOf.assign(n, -1);
    out_.normRunsFrom.assign(n, 0);
    if (!choices_.fuseLaunches || !choices_.fuseNorms)
      return;
    for (size_t i = 0; i < n; ++i) {
      const OpT &norm = *plan_.ops[i];
      const plan::RmsNormAttrsT *a = norm.attrs.AsRmsNormAttrs();
      if (!a || norm.inputs.size() != 2 || norm.outputs.size() != 1 || !validBuffers(norm))
        continue;
      const uint32_t in = norm.inputs[0], out = norm.outputs[0];
      int64_t width = 1;
      for (size_t d = 1; d < buf(in).shape.size(); ++d)
        width *= buf(in).shape[d];
      // In place, the readers' launches that normalize must be those of exactly the steps
      // the norm's launch skips (all readers cover the same steps), or x is normalized twice.
      const bool inPlace = in == out;
      if ((overlaps(in, out) && !inPlace) || out == plan_.logits_buffer || width != a->dim ||
          !isFloatWeightType(buf(norm.inputs[1]).dtype) || !aligned16(norm.inputs[1]))
        continue;
      std::vector<size_t> readers;
      uint32_t covered = kEveryStep, coveredMost = 0;
      bool inputChanged = false;
      for (size_t j = i + 1; j < n && covered > 0; ++j) {
        const OpT &op = *plan_.ops[j];
        if (!validBuffers(op)) {
          covered = 0;
          break;
        }
        bool reads = false, writesOut = false, writesIn = false;
        for (uint32_t b : op.inputs)
          reads = reads || overlaps(b, out);
        for (uint32_t b : op.outputs) {
          writesOut = writesOut || overlaps(b, out);
          writesIn = writesIn || overlaps(b, in);
        }
        if (reads) {
          const plan::LinearAttrsT *la = op.attrs.AsLinearAttrs();
          bool fits = la && op.inputs[0] == out && la->in_features == a->dim && !inputChanged &&
                      !writesIn;
          for (size_t k = 1; fits && k < op.inputs.size(); ++k)
            fits = !overlaps(op.inputs[k], out);
          const uint32_t rows = fits ? normRows(j, in) : 0u;
          covered = std::min(covered, rows);
          coveredMost = std::max(coveredMost, rows);
          readers.push_back(j);
        }
        if (writesOut)
          break;
        inputChanged = inputChanged || writesIn;
      }
      if (covered == 0 || readers.empty() || (inPlace && coveredMost != covered))
        continue;
      for (size_t r : readers)
        out_.normOf[r] = static_cast<int>(i);
      out_.normRunsFrom[i] = covered == kEveryStep ? kEveryStep : covered + 1;
    }
  }

  // The 16-bit type in which the GEMM of linear op `index` reads its x on sm_90a (plan
  // DType: the weights' f16/bf16, f16 for group-quantized and ternary weights), or 0 where it
  // has no GEMM (last-row-only) or its GEMM does not run on wgmma (KernelEmitter.cpp's addGemm
  // decides the same way).
  int wgmmaInputType(size_t index) const {
    const OpT &op = *plan_.ops[index];
    const plan::LinearAttrsT *a = op.attrs.AsLinearAttrs();
    if (!a || a->last_row_only || !validBuffers(op) || op.inputs.size() < 2 ||
        a->in_features % gemm::kTileK != 0)
      return 0;
    const DType wType = buf(op.inputs[1]).dtype;
    if ((wType == DType::F16 || wType == DType::BF16) && vecGemv(op, op.inputs[0]))
      return int(wType);
    return quant::formatOfPlanDType(int(wType)) >= 0 || ternary::isTernaryPlanDType(int(wType))
               ? int(DType::F16)
               : 0;
  }

  // An RMSNorm (its launch running the long steps, not in place) or a tensor-core prefill
  // attention whose output only the next linear op or group reads, on wgmma GEMMs that take
  // x in one 16-bit type: in steps of more than kLinearGemvRows tokens it writes its output
  // rounded to that type into the x16 workspace (and not in f32), and the GEMM has no
  // rounding launch: a launch and a round trip of the activation less per GEMM.
  void findProducerRounds() {
    const size_t n = plan_.ops.size();
    out_.roundsOutput.assign(n, 0);
    out_.inputRounded.assign(n, false);
    if (!choices_.wgmmaGemm || !choices_.tensorCoreGemm || maxRows() <= kLinearGemvRows)
      return;
    for (size_t p = 0; p + 1 < n; ++p) {
      const OpT &producer = *plan_.ops[p];
      if (!validBuffers(producer) || producer.outputs.size() != 1)
        continue;
      const uint32_t out = producer.outputs[0];
      bool fits = false;
      if (const plan::RmsNormAttrsT *norm = producer.attrs.AsRmsNormAttrs())
        fits = producer.inputs.size() == 2 && !overlaps(producer.inputs[0], out) &&
               out_.normRunsFrom[p] <= kLinearGemvRows + 1 && norm->dim > 0;
      if (const plan::AttentionAttrsT *att = producer.attrs.AsAttentionAttrs())
        fits = producer.inputs.size() >= 5 &&
               tensorCorePrefill(choices_, buf(producer.inputs[3]).dtype, att->head_dim);
      const LinearGroup &group = out_.linearGroups[p + 1];
      if (!fits || group.head != p + 1)
        continue;
      const size_t end = p + 1 + std::max<size_t>(group.size, 1);
      const int type = wgmmaInputType(p + 1);
      bool ok = type != 0;
      for (size_t r = p + 1; ok && r < end; ++r) {
        const OpT &reader = *plan_.ops[r];
        ok = wgmmaInputType(r) == type && reader.inputs[0] == out;
        for (size_t k = 1; ok && k < reader.inputs.size(); ++k)
          ok = !overlaps(reader.inputs[k], out);
      }
      // Nothing after the readers reads the output before it is written again.
      if (!ok || readFrom(end, out))
        continue;
      out_.roundsOutput[p] = type;
      out_.inputRounded[p + 1] = true;
    }
  }

  // The most tokens of the steps whose launches of linear op `index` can normalize their
  // input themselves, x read from buffer `input` (0: none; kEveryStep: every step): the
  // 16-byte GEMV's (up to kLinearGemvRows rows, and every lm_head row) and the bulk
  // one-token GEMVs' of quantized and TQ1 weights (one-token steps, and the lm_head's row of
  // any single-sequence step).
  uint32_t normRows(size_t index, uint32_t input) const {
    const OpT &op = *plan_.ops[index];
    const plan::LinearAttrsT &a = *op.attrs.AsLinearAttrs();
    const DType wType = buf(op.inputs[1]).dtype;
    if (isFloatWeightType(wType)) {
      // The fused norm costs instructions per weight chunk; the launch it saves, a fixed
      // few microseconds. H200: the 23M's GEMVs (1-4 MiB) gained, 23M decode 9,452 ->
      // 10,359-10,469 tok/s; the 8B fp16's (32-112 MiB of f16 per reader) lost, 246.1 ->
      // 242.4-243.3. So only readers of at most kNormFusionMaxWeightBytes take it.
      if (!vecGemv(op, op.inputs[0]) || !vecGemv(op, input) ||
          uint64_t(a.in_features) * uint64_t(a.out_features) * dtypeBytes(wType) >
              kNormFusionMaxWeightBytes)
        return 0;
      return a.last_row_only ? kEveryStep : kLinearGemvRows;
    }
    if (wType == DType::TQ1) { // gemv_tq1_bulk.cuh, as the quantized bulk GEMV below
      if (!choices_.bulkGemv || !aligned16(input))
        return 0;
      const bool swiGlu = out_.swiGluOfGroup[out_.linearGroups[index].head] >= 0;
      for (bool layout : {false, swiGlu})
        if (!gemv::tq1BulkLayout(int(a.in_features), int(a.out_features), layout).fits)
          return 0;
      if (a.last_row_only)
        return maxBatch() == 1 ? kEveryStep : 0;
      return 1;
    }
    const int format = quant::formatOfPlanDType(int(wType));
    if (format < 0 || !choices_.bulkGemv || !aligned16(input))
      return 0;
    const quant::QuantFormatTraits traits =
        quant::quantFormatTraits(static_cast<quant::QuantFormatId>(format));
    const bool swiGlu = out_.swiGluOfGroup[out_.linearGroups[index].head] >= 0;
    for (bool layout : {false, swiGlu}) // the member's own layout, and the pair's
      if (!gemv::bulkLayout(traits.bits, traits.groupSize, a.in_features, a.out_features, layout,
                            choices_.deepBulkRing)
               .fits)
        return 0;
    if (a.last_row_only) // a plan of several sequences has a multi-row lm_head launch
      return maxBatch() == 1 ? kEveryStep : 0;
    return 1;
  }

  void findRopeAppends() {
    const size_t n = plan_.ops.size();
    out_.ropeAppends.clear();
    out_.ropeAppendOf.assign(n, -1);
    if (!choices_.fuseLaunches)
      return;
    for (size_t i = 2; i < n; ++i) {
      const plan::AttentionAttrsT *att = plan_.ops[i]->attrs.AsAttentionAttrs();
      const plan::RopeAttrsT *r0 = plan_.ops[i - 2]->attrs.AsRopeAttrs();
      const plan::RopeAttrsT *r1 = plan_.ops[i - 1]->attrs.AsRopeAttrs();
      if (!att || !r0 || !r1)
        continue;
      const OpT &attention = *plan_.ops[i], &a = *plan_.ops[i - 2], &b = *plan_.ops[i - 1];
      if (attention.inputs.size() < 5 || a.inputs.size() != 2 || b.inputs.size() != 2 ||
          a.outputs.size() != 1 || b.outputs.size() != 1)
        continue;
      // Which Rope op rotates q and which k.
      const bool aIsQ = a.outputs[0] == attention.inputs[0];
      const OpT &q = aIsQ ? a : b, &k = aIsQ ? b : a;
      const plan::RopeAttrsT &rq = aIsQ ? *r0 : *r1, &rk = aIsQ ? *r1 : *r0;
      bool ok = q.outputs[0] == attention.inputs[0] && k.outputs[0] == attention.inputs[1] &&
                q.inputs[0] == q.outputs[0] && k.inputs[0] == k.outputs[0] &&
                q.inputs[1] == k.inputs[1] && rq.heads == att->heads && rk.heads == att->kv_heads &&
                rq.head_dim == att->head_dim && rk.head_dim == att->head_dim &&
                rq.theta == rk.theta && rq.attention_factor == rk.attention_factor &&
                rq.dynamic_factor == rk.dynamic_factor &&
                rq.original_max_positions == rk.original_max_positions &&
                rq.long_factors == rk.long_factors &&
                !overlaps(attention.inputs[2], attention.inputs[0]) &&
                !overlaps(attention.inputs[2], attention.inputs[1]);
      for (int c = 3; ok && c <= 4; ++c) {
        const BufferT &cache = buf(attention.inputs[c]);
        ok = cache.kind == BufferKind::KvCache && cache.dtype == DType::F16 &&
             cache.size_bytes >= uint64_t(maxBatch()) * kvSlotBytes(DType::F16, *att);
      }
      if (!ok)
        continue;
      const int ropeAppend = int(out_.ropeAppends.size());
      out_.ropeAppendOf[i - 2] = out_.ropeAppendOf[i - 1] = out_.ropeAppendOf[i] = ropeAppend;
      const bool decodeRopes = tensorCoreDecode(choices_, DType::F16, att->head_dim) &&
                               !readFrom(i + 1, attention.inputs[0]) &&
                               !readFrom(i + 1, attention.inputs[1]);
      out_.ropeAppends.push_back({i - 2, i - 1, i, decodeRopes});
    }
  }

  bool groupable(const OpT &op) const {
    const plan::LinearAttrsT *a = op.attrs.AsLinearAttrs();
    return a && !a->last_row_only && !a->residual && op.inputs.size() >= 2 &&
           op.outputs.size() == 1 && op.inputs[0] < plan_.buffers.size() &&
           op.inputs[1] < plan_.buffers.size() && op.outputs[0] < plan_.buffers.size();
  }

  // Which GEMV kernel family an op's weights take (one launch bound per group).
  int gemvKind(const OpT &op) const {
    const DType dtype = buf(op.inputs[1]).dtype;
    if (ternary::isTernaryPlanDType(int(dtype)))
      return dtype == DType::TQ1 ? 3 : 2;
    return quant::formatOfPlanDType(int(dtype)) >= 0 ? 1 : 0;
  }

  const plan::PlanT &plan_;
  FusionChoices choices_;
  LaunchFusions out_;
};

} // namespace

bool tensorCoreDecode(const FusionChoices &choices, plan::DType kvType, int headDim) {
  return choices.tensorCoreGemm && (kvType == plan::DType::F16 || kvType == plan::DType::Q8_KV) &&
         headDim % 16 == 0 && headDim <= 128;
}

bool tensorCorePrefill(const FusionChoices &choices, plan::DType kvType, int headDim) {
  return kvType == plan::DType::F16 && tensorCoreDecode(choices, kvType, headDim);
}

LaunchFusions findLaunchFusions(const plan::PlanT &plan, const FusionChoices &choices) {
  return FusionSearch(plan, choices).run();
}

} // namespace ninfer
