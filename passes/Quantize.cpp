// ninfer-quantize: quantizes the weights of linear, lm_head and embedding ops to
// the group formats of ninfer/QuantFormats.h with the numeric core of
// passes/quant (GPTQ on calibration Hessians, RTN, AWQ search, the exact bit
// allocator), stores the packed bytes through the QuantizeEnvironment and marks
// each ninfer.weight op with `ninfer.storage` (see Passes.td, Quantize.h).
//
// Mixed precision follows what measured best in tests/quant/model_eval: a
// tensor's cost of being quantized is its relative output error
// tr(E H E^T) / tr(W H W^T) times its sensitivity, the KL divergence the model
// shows on calibration text with only that tensor quantized (at
// settings.sensitivityFormat) divided by that format's relative error. Plain
// relative errors treat the embedding and lm_head like any layer, and those are
// the tensors the output is most sensitive to. The budget counts every byte:
// tensors that stay unquantized (norms) are subtracted first.
//
// Cost: every tensor is quantized in each of the mixed candidates, so the GPTQ
// factor of an input's Hessian is made once and shared by the tensors reading
// that input and by all candidates, and each candidate's output error is
// GPTQ's own loss estimate tr(E Hd E^T) (Gptq.h) rather than a second pass
// over H.
#include "passes/Quantize.h"
#include "passes/Passes.h"

#include "ir/NinferDialect.h"
#include "ir/NinferOps.h"

#include "Awq.h"
#include "BitAllocator.h"
#include "CodeDescent.h"
#include "FloatTarget.h"
#include "Gptq.h"
#include "QuantError.h"
#include "Rtn.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>

namespace ninfer {
#define GEN_PASS_DEF_QUANTIZE
#include "passes/Passes.h.inc"
} // namespace ninfer

using namespace mlir;

namespace ninfer {
namespace {

llvm::Error quantError(const llvm::Twine& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

// Candidates the allocator chooses from in mixed mode (those the model_eval
// harness found useful: q8 only with 64-value groups, no q2 with 128). K16 takes
// the place of group 32 for q2..q4: the same bytes, and on pycode-llama-23m a lower
// GPTQ error for every tensor (22% lower at 3 bits), so G32 would never be chosen.
const char* const kMixedCandidates[] = {"q2_k16",  "q2_g64", "q3_k16", "q3_g64",
                                        "q3_g128", "q4_k16", "q4_g64", "q4_g128",
                                        "q5_g64",  "q6_g64", "q8_g64"};

quant::QuantSpec specOfName(llvm::StringRef name) {
  quant::QuantSpec spec;
  spec.bits = 0;
  unsigned bits = 0, group = 0;
  // "q3_g64", or "q3_k16" for K16 (group size 16 means the two-level scales).
  if (!name.consume_front("q") || name.consumeInteger(10, bits) || !name.consume_front("_"))
    return spec;
  const bool k16 = name.consume_front("k");
  if ((k16 || name.consume_front("g")) && !name.consumeInteger(10, group) && name.empty() &&
      k16 == (int(group) == quant::kQuantK16Group) &&
      quant::quantFormatIndex(int(bits), int(group)) >= 0) {
    spec.bits = int(bits);
    spec.groupSize = int(group);
  }
  return spec;
}

// Rows sampled for tr(W H W^T) and RTN's output error (an unbiased estimate).
constexpr int64_t kErrorRows = 512;

std::string formatName(const quant::QuantSpec& spec) {
  return quant::quantFormatTraits(spec.formatId()).name;
}

// One tensor the pass quantizes: every ninfer.weight op of that name.
struct Candidate {
  std::string name;
  int64_t rows = 0, cols = 0;
  bool isTable = false; // read by an embedding: no input statistics
  llvm::SmallVector<WeightOp, 2> ops;
  const InputStatistics* stats = nullptr;
  std::vector<float> awqScales; // empty: no AWQ for this tensor
};

struct QuantizeResultOne {
  quant::QuantizedTensor tensor;
  double relativeError = 0;
};

// A tensor ready to be quantized in any format: its (AWQ-scaled) weights, the
// Hessian of its input (scaled likewise), the GPTQ factor of that Hessian and
// tr(W Hd W^T), the denominator of its relative errors.
struct PreparedTensor {
  std::vector<float> w;
  std::vector<double> scaledH;
  const double* h = nullptr; // nullptr: no input statistics
  std::shared_ptr<const quant::GptqFactor> factor;
  double reference = 0;
};

struct QuantizePass : impl::QuantizeBase<QuantizePass> {
  using impl::QuantizeBase<QuantizePass>::QuantizeBase;
  QuantizePass() = default;

  QuantizePass(const QuantizeSettings& settings, QuantizeEnvironment* environment,
               QuantizeReport* report)
      : settings_(settings), environment_(environment), report_(report) {
    method = settings.gptq ? "gptq" : "rtn";
    bits = settings.bits;
    group = settings.groupSize;
    bpw = settings.bpw;
    awq = settings.awq;
  }

  void runOnOperation() override;

private:
  llvm::Error run(ModuleOp module);
  llvm::Error collect(func::FuncOp forward);
  llvm::Error applyAwq(func::FuncOp forward, const quant::QuantSpec& spec);
  // withReference: compute tr(W Hd W^T) for relative errors (else 0).
  llvm::Expected<PreparedTensor> prepare(const Candidate& c, bool withReference = true);
  llvm::Expected<QuantizeResultOne> quantizeOne(const Candidate& c, const PreparedTensor& t,
                                                const quant::QuantSpec& spec,
                                                bool dequantized = true);
  llvm::Expected<std::vector<float>> weightsOf(const Candidate& c);
  void store(const Candidate& c, QuantizeResultOne result);
  // settings.sequential: every tensor in `chosen[i]`, in the order the model
  // reads them, GPTQ on the H the environment measures with the tensors before
  // it replaced by their quantized values. Indexed like candidates_.
  llvm::Expected<std::vector<QuantizeResultOne>>
  quantizeSequentially(func::FuncOp forward, const std::vector<quant::QuantSpec>& chosen);
  // Bytes of every weight of `forward` except RoPE tables and `skip`, as stored now.
  uint64_t storedWeightBytes(func::FuncOp forward, const std::set<std::string>& skip);

  QuantizeSettings settings_;
  QuantizeEnvironment* environment_ = nullptr;
  QuantizeReport* report_ = nullptr;
  QuantizeReport localReport_;

  std::vector<Candidate> candidates_;
  // The last GPTQ factor made, by input statistics and AWQ scales: tensors
  // reading one input (q/k/v, gate/up) are consecutive and share it.
  const InputStatistics* factorStats_ = nullptr;
  const std::vector<float>* factorAwq_ = nullptr;
  std::shared_ptr<const quant::GptqFactor> factor_;
  uint64_t parameters_ = 0;
};

void QuantizePass::runOnOperation() {
  if (!environment_) {
    getOperation().emitError("ninfer-quantize needs the compiler's weight store and calibration "
                             "data: run it through ninferc (--quant / --bpw)");
    return signalPassFailure();
  }
  // Options set on the command line (ninfer-opt) or by the constructor.
  settings_.gptq = method != "rtn";
  settings_.bits = bits;
  settings_.groupSize = group;
  settings_.bpw = bpw;
  settings_.awq = awq;
  if (method != "rtn" && method != "gptq") {
    getOperation().emitError("ninfer-quantize: method must be gptq or rtn, got '" + method + "'");
    return signalPassFailure();
  }
  if (llvm::Error error = run(getOperation())) {
    getOperation().emitError(llvm::toString(std::move(error)));
    return signalPassFailure();
  }
}

// Which weights are quantized, and the bytes of the others.
llvm::Error QuantizePass::collect(func::FuncOp forward) {
  llvm::MapVector<llvm::StringRef, llvm::SmallVector<WeightOp, 2>> byName;
  forward.walk([&](WeightOp op) { byName[op.getName()].push_back(op); });
  const CalibrationData* calibration = environment_->calibration();
  for (auto& [name, ops] : byName) {
    RankedTensorType type = ops.front().getOutput().getType();
    bool matrixUse = true, table = false, anyUse = false, invFreq = false;
    for (WeightOp op : ops)
      for (OpOperand& use : op.getOutput().getUses()) {
        anyUse = true;
        Operation* user = use.getOwner();
        const bool weightOperand = use.getOperandNumber() == 1;
        if (isa<EmbeddingOp>(user) && weightOperand)
          table = true;
        else if (!(isa<LinearOp, LmHeadOp>(user) && weightOperand))
          matrixUse = false;
        if (isa<RopeOp>(user))
          invFreq = true;
      }
    uint64_t elements = 1;
    for (int64_t dim : type.getShape())
      elements *= uint64_t(dim);
    if (!invFreq)
      parameters_ += elements;
    const bool already = ops.front()->hasAttr(kStorageAttr);
    if (!anyUse || !matrixUse || type.getRank() != 2 || already ||
        !quant::isQuantizableCols(type.getDimSize(1)))
      continue;
    Candidate c;
    c.name = name.str();
    c.rows = type.getDimSize(0);
    c.cols = type.getDimSize(1);
    c.isTable = table;
    c.ops = ops;
    if (calibration) {
      auto it = calibration->inputs.find(c.name);
      if (it != calibration->inputs.end()) {
        if (it->second->cols != c.cols)
          return quantError("calibration statistics of '" + c.name + "' have " +
                            llvm::Twine(it->second->cols) + " columns, the weight has " +
                            llvm::Twine(c.cols));
        c.stats = it->second.get();
      }
    }
    candidates_.push_back(std::move(c));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<float>> QuantizePass::weightsOf(const Candidate& c) {
  llvm::Expected<std::vector<float>> w = environment_->readF32(c.name, c.rows, c.cols);
  if (!w || c.awqScales.empty())
    return w;
  return quant::scaleColumns(w->data(), c.rows, c.cols, c.awqScales.data());
}

// AWQ: one scale vector per RMSNorm whose output only feeds quantized linear
// layers (q/k/v, gate/up), folded into a new f32 norm weight g / s.
llvm::Error QuantizePass::applyAwq(func::FuncOp forward, const quant::QuantSpec& spec) {
  std::map<std::string, Candidate*> byName;
  for (Candidate& c : candidates_)
    byName[c.name] = &c;
  llvm::SmallVector<RmsNormOp> norms;
  forward.walk([&](RmsNormOp norm) { norms.push_back(norm); });
  int done = 0;
  for (RmsNormOp norm : norms) {
    environment_->progress("AWQ scale search", done++, int(norms.size()));
    std::vector<Candidate*> members;
    bool foldable = !norm.getOutput().use_empty();
    for (OpOperand& use : norm.getOutput().getUses()) {
      auto linear = dyn_cast<LinearOp>(use.getOwner());
      auto weight = linear ? linear.getWeight().getDefiningOp<WeightOp>() : WeightOp();
      auto it = weight ? byName.find(weight.getName().str()) : byName.end();
      if (!linear || use.getOperandNumber() != 0 || it == byName.end() || !it->second->stats) {
        foldable = false;
        break;
      }
      if (std::find(members.begin(), members.end(), it->second) == members.end())
        members.push_back(it->second);
    }
    auto normWeight = norm.getWeight().getDefiningOp<WeightOp>();
    // Only a norm over the whole row (not qwen3's per-head q/k norm) whose
    // weight tensor no other op reads can take the scales.
    if (!foldable || members.empty() || !normWeight ||
        normWeight.getOutput().getType().getDimSize(0) != members.front()->cols ||
        !normWeight.getOutput().hasOneUse())
      continue;
    const int64_t cols = members.front()->cols;
    std::vector<std::vector<float>> weights;
    std::vector<quant::AwqTensor> tensors;
    for (Candidate* m : members) {
      llvm::Expected<std::vector<float>> w = environment_->readF32(m->name, m->rows, m->cols);
      if (!w)
        return w.takeError();
      weights.push_back(std::move(*w));
    }
    for (size_t i = 0; i < members.size(); ++i)
      tensors.push_back({weights[i].data(), members[i]->rows});
    quant::AwqOptions options;
    options.threads = settings_.threads;
    options.maxRows = 256;
    const InputStatistics& stats = *members.front()->stats;
    Result<quant::AwqResult> found =
        quant::searchAwqScales(tensors, cols, stats.h.data(), stats.meanAbs.data(), spec, options);
    if (!found.isOk())
      return quantError("AWQ for '" + members.front()->name + "': " + found.status().message());
    if (found->alpha == 0.0f)
      continue; // plain RTN scored best: nothing to fold
    // Fold: g' = g / s, stored f32 so the product g' * s is g up to one f32 rounding.
    llvm::Expected<std::vector<float>> g =
        environment_->readF32(normWeight.getName().str(), 1, cols);
    if (!g)
      return g.takeError();
    for (int64_t j = 0; j < cols; ++j)
      (*g)[j] /= found->scales[j];
    const std::string foldedName = normWeight.getName().str() + ".awq";
    environment_->storeF32(foldedName, std::move(*g));
    OpBuilder builder(normWeight);
    auto foldedType = RankedTensorType::get({cols}, builder.getF32Type());
    auto folded = builder.create<WeightOp>(normWeight.getLoc(), foldedType, foldedName);
    norm->setOperand(1, folded.getResult());
    if (normWeight.getOutput().use_empty())
      normWeight.erase();
    for (Candidate* m : members)
      m->awqScales = found->scales;
  }
  environment_->progress("AWQ scale search", done, int(norms.size()));
  return llvm::Error::success();
}

llvm::Expected<PreparedTensor> QuantizePass::prepare(const Candidate& c, bool withReference) {
  PreparedTensor t;
  llvm::Expected<std::vector<float>> w = weightsOf(c);
  if (!w)
    return w.takeError();
  t.w = std::move(*w);
  if (!c.stats)
    return t;
  // With AWQ, w is W diag(s) and its input is x / s: the Hessian scales too.
  t.h = c.stats->h.data();
  if (!c.awqScales.empty()) {
    t.scaledH = quant::scaleHessian(t.h, c.cols, c.awqScales.data());
    t.h = t.scaledH.data();
  }
  if (settings_.hessianShrink > 0) { // noisy off-diagonal estimates (Gptq.h)
    t.scaledH = quant::shrinkHessian(t.h, c.cols, settings_.hessianShrink);
    t.h = t.scaledH.data();
  }
  double damp = 0;
  if (settings_.gptq) {
    const bool same = factor_ && factorStats_ == c.stats &&
                      (factorAwq_ ? *factorAwq_ == c.awqScales : c.awqScales.empty());
    if (!same) {
      quant::GptqOptions options;
      options.threads = settings_.threads;
      options.actOrder = settings_.actOrder;
      Result<quant::GptqFactor> f = quant::factorGptq(t.h, c.cols, options);
      if (!f.isOk())
        return quantError("GPTQ of '" + c.name + "': " + f.status().message());
      factor_ = std::make_shared<const quant::GptqFactor>(std::move(*f));
      factorStats_ = c.stats;
      factorAwq_ = c.awqScales.empty() ? nullptr : &c.awqScales;
    }
    t.factor = factor_;
    damp = factor_->damp;
  }
  if (!withReference)
    return t;
  // tr(W Hd W^T) with Hd = H + damp I on the live columns, over sampled rows.
  const std::vector<int64_t> rows = quant::sampleRows(c.rows, kErrorRows);
  double norm = 0;
  for (int64_t r : rows)
    for (int64_t j = 0; j < c.cols; ++j)
      if (t.h[j * c.cols + j] > 0)
        norm += double(t.w[size_t(r * c.cols + j)]) * t.w[size_t(r * c.cols + j)];
  t.reference =
      (quant::weightedSquaredNorm(t.w.data(), nullptr, c.cols, t.h, rows, settings_.threads) +
       damp * norm) *
      double(c.rows) / double(rows.size());
  return t;
}

llvm::Expected<QuantizeResultOne> QuantizePass::quantizeOne(const Candidate& c,
                                                            const PreparedTensor& t,
                                                            const quant::QuantSpec& spec,
                                                            bool dequantized) {
  QuantizeResultOne out;
  const std::vector<float>& w = t.w;
  if (t.factor) {
    // GPTQ's own loss estimate is tr(E Hd E^T): no separate error pass.
    quant::GptqOptions options;
    options.threads = settings_.threads;
    options.actOrder = settings_.actOrder;
    options.keepDequantized = dequantized;
    Result<quant::GptqResult> g = quant::quantizeGptq(w.data(), c.rows, *t.factor, spec, options);
    if (!g.isOk())
      return quantError("GPTQ of '" + c.name + "': " + g.status().message());
    out.tensor = std::move(g->tensor);
    double loss = g->lossEstimate;
    if (settings_.codeSweeps > 0) {
      Result<double> refined = quant::refineCodes(w.data(), t.h, t.factor->damp,
                                                  settings_.codeSweeps, settings_.threads,
                                                  out.tensor);
      if (!refined.isOk())
        return quantError("'" + c.name + "': " + refined.status().message());
      loss = *refined;
    }
    out.relativeError = t.reference > 0 ? loss / t.reference : 0.0;
    return out;
  }
  std::vector<float> importance;
  if (t.h) {
    importance.resize(size_t(c.cols));
    for (int64_t j = 0; j < c.cols; ++j)
      importance[size_t(j)] = float(t.h[j * c.cols + j]);
  }
  quant::RtnOptions options;
  options.threads = settings_.threads;
  Result<quant::QuantizedTensor> q = quant::quantizeRtn(w.data(), c.rows, c.cols, spec,
                                                        t.h ? importance.data() : nullptr, options);
  if (!q.isOk())
    return quantError("RTN of '" + c.name + "': " + q.status().message());
  out.tensor = std::move(*q);
  if (t.h) {
    const std::vector<int64_t> rows = quant::sampleRows(c.rows, kErrorRows);
    const double error = quant::weightedSquaredNorm(w.data(), out.tensor.dequantized.data(), c.cols,
                                                    t.h, rows, settings_.threads) *
                         double(c.rows) / double(rows.size());
    out.relativeError = t.reference > 0 ? error / t.reference : 0.0;
  } else { // no input statistics (the embedding table): relative squared error
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = double(w[i]) - out.tensor.dequantized[i];
      num += d * d;
      den += double(w[i]) * w[i];
    }
    out.relativeError = den > 0 ? num / den : 0.0;
  }
  return out;
}

// Dequantized values of an AWQ-scaled tensor back in the model's space (its input is not scaled).
void undoAwqScales(const Candidate& c, std::vector<float>& values) {
  if (!c.awqScales.empty())
    for (size_t j = 0; j < values.size(); ++j)
      values[j] /= c.awqScales[j % size_t(c.cols)];
}

llvm::Expected<std::vector<QuantizeResultOne>>
QuantizePass::quantizeSequentially(func::FuncOp forward,
                                   const std::vector<quant::QuantSpec>& chosen) {
  // Model order: by the first op that reads the tensor.
  llvm::DenseMap<Operation*, int> position;
  forward.walk([&](Operation* op) { position[op] = int(position.size()); });
  std::vector<std::pair<int, size_t>> order;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    int first = INT32_MAX;
    for (WeightOp op : candidates_[i].ops)
      for (Operation* user : op.getOutput().getUsers())
        first = std::min(first, position.lookup(user));
    order.emplace_back(first, i);
  }
  std::sort(order.begin(), order.end());
  std::vector<QuantizeResultOne> results(candidates_.size());
  // Every input's statistics stay alive: the factor cache compares their addresses.
  std::vector<std::shared_ptr<const InputStatistics>> measured;
  int done = 0;
  for (const auto& [first, i] : order) {
    environment_->progress("sequential GPTQ", done++, int(order.size()));
    Candidate c = candidates_[i];
    // A table read by the embedding keeps the float model's H (of the lm_head
    // it is tied to): it is needed before any input is measured.
    if (c.stats && !c.isTable) {
      llvm::Expected<std::shared_ptr<const InputStatistics>> stats =
          environment_->sequentialStatistics(c.name, settings_.floatTarget);
      if (!stats)
        return stats.takeError();
      if ((*stats)->cols != c.cols)
        return quantError("sequential statistics of '" + c.name + "' have " +
                          llvm::Twine((*stats)->cols) + " columns, the weight has " +
                          llvm::Twine(c.cols));
      c.stats = stats->get();
      measured.push_back(std::move(*stats));
    }
    llvm::Expected<PreparedTensor> t = prepare(c);
    if (!t)
      return t.takeError();
    if (t->factor && !c.stats->floatShift.empty()) {
      Result<std::vector<float>> shifted =
          quant::shiftToFloatTarget(t->w.data(), c.rows, c.cols, t->h, t->factor->damp,
                                    c.stats->floatShift.data(), settings_.threads);
      if (!shifted.isOk())
        return quantError("'" + c.name + "': " + shifted.status().message());
      t->w = std::move(*shifted);
    }
    llvm::Expected<QuantizeResultOne> q = quantizeOne(c, *t, chosen[i], /*dequantized=*/true);
    if (!q)
      return q.takeError();
    std::vector<float> values = std::move(q->tensor.dequantized);
    undoAwqScales(c, values);
    if (llvm::Error error = environment_->replaceWeight(c.name, std::move(values)))
      return error;
    results[i] = std::move(*q);
  }
  environment_->progress("sequential GPTQ", done, int(order.size()));
  return results;
}

void QuantizePass::store(const Candidate& c, QuantizeResultOne result) {
  const std::string format = formatName(result.tensor.spec);
  QuantizedTensorInfo info;
  info.name = c.name;
  info.format = format;
  info.rows = c.rows;
  info.cols = c.cols;
  info.bytes = result.tensor.packed.size();
  info.relativeError = result.relativeError;
  localReport_.tensors.push_back(info);
  environment_->storeQuantized(c.name, int(result.tensor.spec.formatId()), c.rows, c.cols,
                               std::move(result.tensor.packed));
  for (WeightOp op : c.ops)
    op->setAttr(kStorageAttr, StringAttr::get(op->getContext(), format));
}

uint64_t QuantizePass::storedWeightBytes(func::FuncOp forward,
                                         const std::set<std::string>& skip) {
  uint64_t total = 0;
  std::set<std::string> seen;
  forward.walk([&](WeightOp op) {
    const std::string name = op.getName().str();
    bool invFreq = false;
    for (Operation* user : op.getOutput().getUsers())
      invFreq |= isa<RopeOp>(user);
    if (!invFreq && !skip.count(name) && seen.insert(name).second)
      total += environment_->storedBytes(name);
  });
  return total;
}

llvm::Error QuantizePass::run(ModuleOp module) {
  const auto start = std::chrono::steady_clock::now();
  if (llvm::Error error = validateQuantizeSettings(settings_))
    return error;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return quantError("the module has no func.func @forward with a body");
  if (llvm::Error error = collect(forward))
    return error;
  if (candidates_.empty())
    return quantError("no weight can be quantized (linear/lm_head/embedding weights whose "
                      "columns are a multiple of 128)");

  const bool mixed = settings_.bpw > 0;
  quant::QuantSpec uniform;
  uniform.bits = mixed ? 4 : settings_.bits;
  uniform.groupSize = settings_.groupSize;
  if (settings_.awq && environment_->calibration())
    if (llvm::Error error = applyAwq(forward, uniform))
      return error;

  const int count = int(candidates_.size());
  if (!mixed && settings_.sequential) {
    llvm::Expected<std::vector<QuantizeResultOne>> results =
        quantizeSequentially(forward, std::vector<quant::QuantSpec>(candidates_.size(), uniform));
    if (!results)
      return results.takeError();
    for (int i = 0; i < count; ++i)
      store(candidates_[size_t(i)], std::move((*results)[size_t(i)]));
  } else if (!mixed) {
    for (int i = 0; i < count; ++i) {
      environment_->progress("quantizing", i, count);
      const Candidate& c = candidates_[size_t(i)];
      llvm::Expected<PreparedTensor> t = prepare(c);
      if (!t)
        return t.takeError();
      llvm::Expected<QuantizeResultOne> q = quantizeOne(c, *t, uniform);
      if (!q)
        return q.takeError();
      store(c, std::move(*q));
    }
    environment_->progress("quantizing", count, count);
  } else {
    // Budget for the quantized tensors: everything else is counted first.
    const double totalBits = settings_.bpw * double(parameters_);
    // What stays as it is (norms, biases, odd shapes), counted after AWQ
    // replaced the norms it folded into by f32 ones.
    std::set<std::string> quantized;
    for (const Candidate& c : candidates_)
      quantized.insert(c.name);
    const double keptBits = 8.0 * double(storedWeightBytes(forward, quantized));
    if (totalBits <= keptBits)
      return quantError(llvm::formatv("--bpw {0}: the weights that stay unquantized alone take "
                                      "{1:F3} bits per weight",
                                      settings_.bpw, keptBits / double(parameters_))
                            .str());
    const quant::QuantSpec sensitivitySpec = specOfName(settings_.sensitivityFormat);
    std::vector<quant::AllocTensor> tensors;
    std::vector<std::vector<quant::QuantSpec>> specs;
    std::vector<double> sensitivities;
    // The candidates' packed bytes, kept for the final store when they fit
    // settings_.keepCandidateBytes (else the chosen ones are made again).
    uint64_t candidateBytes = 0;
    for (const Candidate& c : candidates_)
      for (const char* name : kMixedCandidates) {
        const quant::QuantSpec spec = specOfName(name);
        candidateBytes += quant::quantTensorBytes(spec.bits, spec.groupSize, c.rows, c.cols);
      }
    // Sequential quantization makes the chosen formats again on other statistics.
    const bool keep = !settings_.sequential && candidateBytes <= settings_.keepCandidateBytes;
    std::vector<std::vector<std::vector<uint8_t>>> kept(keep ? candidates_.size() : 0);
    const int steps = count * int(std::size(kMixedCandidates));
    int done = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = candidates_[i];
      llvm::Expected<PreparedTensor> prepared = prepare(c);
      if (!prepared)
        return prepared.takeError();
      quant::AllocTensor t;
      t.name = c.name;
      specs.emplace_back();
      double sensitivityError = -1.0;
      for (const char* name : kMixedCandidates) {
        environment_->progress("quantizing candidates", done++, steps);
        const quant::QuantSpec spec = specOfName(name);
        // Dequantized values only where the sensitivity run needs them.
        llvm::Expected<QuantizeResultOne> q =
            quantizeOne(c, *prepared, spec, /*dequantized=*/spec == sensitivitySpec);
        if (!q)
          return q.takeError();
        t.candidates.push_back(
            {int(specs.back().size()), q->relativeError, uint64_t(q->tensor.packed.size())});
        specs.back().push_back(spec);
        if (spec == sensitivitySpec) {
          // The model with only this tensor quantized: KL divergence per unit
          // of relative error is how much this tensor's errors matter.
          std::vector<float>& dq = q->tensor.dequantized;
          undoAwqScales(c, dq);
          const auto measureStart = std::chrono::steady_clock::now();
          llvm::Expected<double> kld = environment_->klDivergenceWith(c.name, dq);
          localReport_.sensitivitySeconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - measureStart)
                  .count();
          if (!kld)
            return kld.takeError();
          sensitivityError = *kld / std::max(q->relativeError, 1e-30);
        }
        if (keep)
          kept[i].push_back(std::move(q->tensor.packed));
      }
      if (sensitivityError < 0)
        return quantError("the sensitivity format '" + settings_.sensitivityFormat +
                          "' is not a candidate");
      t.weight = sensitivityError;
      sensitivities.push_back(sensitivityError);
      tensors.push_back(std::move(t));
    }
    environment_->progress("quantizing candidates", steps, steps);
    const uint64_t budget = uint64_t(totalBits - keptBits);
    Result<quant::Allocation> allocation = quant::allocateBits(tensors, budget);
    if (!allocation.isOk())
      return quantError(
          llvm::formatv("--bpw {0}: {1}", settings_.bpw, allocation.status().message()).str());
    std::vector<QuantizeResultOne> sequential;
    if (settings_.sequential) {
      std::vector<quant::QuantSpec> chosen;
      for (int i = 0; i < count; ++i)
        chosen.push_back(specs[size_t(i)][size_t(allocation->choice[size_t(i)])]);
      llvm::Expected<std::vector<QuantizeResultOne>> results =
          quantizeSequentially(forward, chosen);
      if (!results)
        return results.takeError();
      sequential = std::move(*results);
    }
    const char* finalStep = keep || settings_.sequential ? "storing" : "quantizing";
    for (int i = 0; i < count; ++i) {
      environment_->progress(finalStep, i, count);
      const Candidate& c = candidates_[size_t(i)];
      const int choice = allocation->choice[size_t(i)];
      const quant::QuantSpec spec = specs[size_t(i)][size_t(choice)];
      QuantizeResultOne result;
      if (settings_.sequential) {
        result = std::move(sequential[size_t(i)]);
      } else if (keep) {
        result.tensor.spec = spec;
        result.tensor.rows = c.rows;
        result.tensor.cols = c.cols;
        result.tensor.packed = std::move(kept[size_t(i)][size_t(choice)]);
      } else {
        llvm::Expected<PreparedTensor> t = prepare(c, /*withReference=*/false);
        if (!t)
          return t.takeError();
        // Deterministic: the same bytes the candidate run measured.
        llvm::Expected<QuantizeResultOne> q = quantizeOne(c, *t, spec, /*dequantized=*/false);
        if (!q)
          return q.takeError();
        result = std::move(*q);
      }
      if (!settings_.sequential)
        result.relativeError = tensors[size_t(i)].candidates[size_t(choice)].error;
      store(c, std::move(result));
      localReport_.tensors.back().sensitivity = sensitivities[size_t(i)];
    }
    environment_->progress(finalStep, count, count);
  }

  // Totals after the rewrite: packed tensors plus everything kept (folded
  // norms replace their originals in the count).
  localReport_.parameters = parameters_;
  localReport_.totalBytes = storedWeightBytes(forward, {});
  localReport_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (report_)
    *report_ = localReport_;
  return llvm::Error::success();
}

} // namespace

llvm::Error validateQuantizeSettings(const QuantizeSettings& settings) {
  if (!(settings.hessianShrink >= 0.0 && settings.hessianShrink <= 1.0))
    return quantError(llvm::formatv("Hessian shrinkage must be between 0 and 1, got {0}",
                                    settings.hessianShrink)
                          .str());
  if (settings.floatTarget && !(settings.sequential && settings.gptq && !settings.awq))
    return quantError("the float target needs sequential GPTQ without AWQ");
  if (!quant::isQuantFormatGroup(settings.groupSize))
    return quantError("group size must be 32, 64, 128 or 16 (K16), got " +
                      llvm::Twine(settings.groupSize));
  if (settings.bpw > 0) {
    // The smallest candidate is q2_g64 (2.25 bits), the largest q8_g64 (8.25).
    if (settings.bpw < 2.25 || settings.bpw > 16.0 || !std::isfinite(settings.bpw))
      return quantError(llvm::formatv("bits per weight must be between 2.25 (every tensor "
                                      "q2_g64) and 16, got {0}",
                                      settings.bpw)
                            .str());
    if (!specOfName(settings.sensitivityFormat).bits)
      return quantError("bad sensitivity format '" + settings.sensitivityFormat + "'");
  } else if (!quant::isQuantBits(settings.bits)) {
    return quantError("quantized weights have 8, 6, 5, 4, 3 or 2 bits, got " +
                      llvm::Twine(settings.bits));
  } else if (quant::quantFormatIndex(settings.bits, settings.groupSize) < 0) {
    return quantError("K16 (group 16) formats have 4, 3 or 2 bits, got " +
                      llvm::Twine(settings.bits));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass> createQuantizePass(const QuantizeSettings& settings,
                                         QuantizeEnvironment* environment, QuantizeReport* report) {
  return std::make_unique<QuantizePass>(settings, environment, report);
}

} // namespace ninfer
