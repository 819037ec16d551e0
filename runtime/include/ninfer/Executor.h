// An executor runs the plan's op list for one step: n tokens at positions
// pos..pos+n-1, appending to its KV cache, and returns the last token's logits.
// A plan compiled for several sequences (ninferc --batch N) keeps N KV caches
// (slots): single-sequence steps name the slot they run in, and a batch step
// decodes one token of each of up to N sequences at once, reading the weights
// once for all of them. Both executors run the same plan; the CPU one is the
// reference.
#pragma once

#include "ninfer/Sampler.h"
#include "ninfer/Status.h"
#include "ninfer/StepAbi.h"
#include "ninfer/TraceAbi.h"

#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace ninfer {

class PlanFile;

// GPU time of one kernel launch of a profiled step.
struct LaunchTiming {
  uint32_t op = 0;       // index into the plan's ops
  uint32_t function = 0; // index into the plan's kernel functions
  double microseconds = 0;
};

// The device-side timeline of one step of a plan compiled with `ninferc --trace`: the
// launches that ran, in launch order, and the events their blocks recorded
// (ninfer/TraceAbi.h). Launches the plan's ops do not own (the step's greedy pick) have op
// kNotAnOp.
struct StepTrace {
  static constexpr uint32_t kNotAnOp = 0xFFFFFFFFu;
  struct Launch {
    uint32_t op = kNotAnOp; // index into the plan's ops
    std::string kernel;     // the kernel function's name
  };
  std::vector<Launch> launches;
  std::vector<trace::Event> events;
  uint64_t recorded = 0; // events the blocks appended (more than events.size(): lost)
};

class Executor {
public:
  virtual ~Executor() = default;
  // One step of sequence `sequence`'s KV-cache slot (0 <= sequence < maxBatch();
  // sequences never see each other's cache). tokens: n ids, 1 <= n <=
  // max_step_tokens, pos + n <= context. logits: vocab_size floats for the step's
  // last token.
  virtual Status forwardSequence(int sequence, const int32_t* tokens, int n, int pos,
                                 float* logits) = 0;
  // The length of the forward pass the next single-sequence steps of `sequence` are chunks
  // of: RoPE whose scaling depends on the sequence's length (dynamic NTK, LongRoPE) takes
  // it for every chunk, as transformers takes the whole prompt's length for each of its
  // tokens (a step that runs past it takes its own end). 0, the start: each step's own end.
  // It holds until set again: callers that split one forward pass into steps set it before
  // the pass (Generator clears it after; ChunkRunner sets it again for each chunk).
  virtual void setSequenceLength(int sequence, int length) {
    if (sequence >= 0 && sequence < int(std::size(forwardEnds_)))
      forwardEnds_[sequence] = length;
  }
  // forwardSequence() of sequence 0, the only one of most plans.
  Status forward(const int32_t* tokens, int n, int pos, float* logits) {
    return forwardSequence(0, tokens, n, pos, logits);
  }
  virtual std::string name() const = 0;
  // The plan's number of sequence slots (Plan.max_batch; 1 for most plans).
  virtual int maxBatch() const { return 1; }
  // One decode step of `batch` distinct sequences (1 <= batch <= maxBatch()):
  // row t appends token tokens[t] at position positions[t] to the cache of
  // sequence sequences[t] and attends to that sequence's positions
  // 0..positions[t]. logits gets batch x vocab_size floats, row t's in row t:
  // each row's logits are those a single-sequence step of that one token would
  // give (bit for bit on the CPU executor).
  virtual Status forwardBatch(const int32_t* tokens, const int32_t* positions,
                              const int32_t* sequences, int batch, float* logits) {
    (void)tokens, (void)positions, (void)sequences, (void)batch, (void)logits;
    return Status::error(name() + " cannot run batch steps");
  }
  // Whether forwardSequenceGreedy() and forwardBatchGreedy() work for this executor and
  // plan.
  virtual bool picksGreedyTokens() const { return false; }
  // Like forwardSequence() and forwardBatch(), but each row gets its greedy token
  // (argmaxToken of its logits, Sampler.h) instead of its logits: the executor picks it,
  // so only the ids leave the GPU.
  virtual Status forwardSequenceGreedy(int sequence, const int32_t* tokens, int n, int pos,
                                       int32_t* id) {
    (void)sequence, (void)tokens, (void)n, (void)pos, (void)id;
    return Status::error(name() + " cannot pick tokens itself");
  }
  virtual Status forwardBatchGreedy(const int32_t* tokens, const int32_t* positions,
                                    const int32_t* sequences, int batch, int32_t* ids) {
    (void)tokens, (void)positions, (void)sequences, (void)batch, (void)ids;
    return Status::error(name() + " cannot pick tokens itself");
  }
  // The largest k for which forwardSequenceTopK() works for this executor and plan (0:
  // none).
  virtual int maxTopKCandidates() const { return 0; }
  // Like forwardSequence(), but `candidates` gets the top-k candidates of the step's logits
  // (Sampler::sampleTopK) instead of the logits: the executor picks them, so only k pairs
  // leave the GPU.
  virtual Status forwardSequenceTopK(int sequence, const int32_t* tokens, int n, int pos, int k,
                                     TopKCandidates* candidates) {
    (void)sequence, (void)tokens, (void)n, (void)pos, (void)k, (void)candidates;
    return Status::error(name() + " cannot pick top-k candidates itself");
  }
  // Whether forwardSequenceSample() works for this executor and plan.
  virtual bool samplesTokens() const { return false; }
  // Like forwardSequence(), but `id` gets the token that Sampler::sampleWith draws from the
  // step's logits with `temperature` alone (Sampler::temperatureOnly) and `uniform` instead
  // of the logits: the executor draws it, so only the id leaves the GPU.
  virtual Status forwardSequenceSample(int sequence, const int32_t* tokens, int n, int pos,
                                       float temperature, double uniform, int32_t* id) {
    (void)sequence, (void)tokens, (void)n, (void)pos, (void)temperature, (void)uniform, (void)id;
    return Status::error(name() + " cannot sample tokens itself");
  }
  // Whether forwardSequenceNucleus() and lastLogits() work for this executor and plan.
  virtual bool picksNucleus() const { return false; }
  // Like forwardSequenceTopK() with k = kMaxTopKCandidates, for top-p sampling without top-k
  // (Sampler::topPOnly) at `temperature`: `mass` also gets the sum over the step's non-NaN
  // logits l of exp((l - max) / temperature), max the highest of them, so that
  // Sampler::sampleTopP can tell whether the nucleus lies among the candidates. Where it does
  // not, lastLogits() gives the step's logits.
  virtual Status forwardSequenceNucleus(int sequence, const int32_t* tokens, int n, int pos,
                                        float temperature, TopKCandidates* candidates,
                                        double* mass) {
    (void)sequence, (void)tokens, (void)n, (void)pos, (void)temperature, (void)candidates,
        (void)mass;
    return Status::error(name() + " cannot pick top-p candidates itself");
  }
  // The logits of the last single-sequence step's last row, after a step that returned
  // something else (forwardSequenceNucleus) and before the next step.
  virtual Status lastLogits(float* logits) {
    (void)logits;
    return Status::error(name() + " keeps no logits of its last step");
  }
  // Whether drawLastNucleus() works for this executor and plan.
  virtual bool drawsNucleus() const { return false; }
  // `id` gets the token Sampler::sampleWith draws with `temperature` and `topP` (no top-k)
  // and `uniform` from the logits lastLogits() would give, drawn by the executor over the
  // whole row, so only the id leaves the GPU (where forwardSequenceNucleus's candidates do not
  // hold the nucleus). Where it fails and drawsNucleus() has turned false, the executor has
  // given the row draw up (the GPU cannot run it) and lastLogits() still works.
  virtual Status drawLastNucleus(float temperature, float topP, double uniform, int32_t* id) {
    (void)temperature, (void)topP, (void)uniform, (void)id;
    return Status::error(name() + " cannot draw top-p over a whole row itself");
  }
  // Whether forwardAllRows() works for this executor and plan.
  virtual bool hasAllRowsLogits() const { return false; }
  // Like forward(), but logits gets n x vocab_size floats: the logits of every
  // token of the step, not only the last (evaluation scores a whole chunk in a
  // few steps instead of one step per scored token). Plans compute lm_head
  // for the last row only; an executor that can compute it for all rows says so
  // with hasAllRowsLogits().
  virtual Status forwardAllRows(const int32_t* tokens, int n, int pos, float* logits) {
    (void)tokens, (void)n, (void)pos, (void)logits;
    return Status::error(name() + " returns only the last token's logits");
  }
  // Device memory this executor holds (weights, arenas, KV cache, staging), in
  // bytes; 0 when it runs on the host.
  virtual uint64_t deviceMemoryBytes() const { return 0; }
  // Runs one step like forward() (no logits returned) with every launch timed
  // on its own: plain launches with a timer between each, so the launches do
  // not overlap and the sum exceeds a graph-replayed step by the gaps it hides.
  virtual Result<std::vector<LaunchTiming>> profileStep(const int32_t* tokens, int n, int pos) {
    (void)tokens, (void)n, (void)pos;
    return Status::error(name() + " cannot time kernels (profiling needs the CUDA executor)");
  }
  // Whether profileStep() and profileBatchStep() work for this executor.
  virtual bool timesKernels() const { return false; }
  // profileStep() for a batch step (as forwardBatch() takes it).
  virtual Result<std::vector<LaunchTiming>> profileBatchStep(const int32_t* tokens,
                                                             const int32_t* positions,
                                                             const int32_t* sequences,
                                                             int batch) {
    (void)tokens, (void)positions, (void)sequences, (void)batch;
    return Status::error(name() + " cannot time kernels (profiling needs the CUDA executor)");
  }
  // Runs one greedy decode step as generation does (a single-sequence step of one token,
  // or a batch step as forwardBatchGreedy() takes it, CUDA graph and all) and returns its
  // timeline. Needs a plan compiled with `ninferc --trace`.
  virtual Result<StepTrace> traceStep(const int32_t* tokens, const int32_t* positions,
                                      const int32_t* sequences, int batch) {
    (void)tokens, (void)positions, (void)sequences, (void)batch;
    return Status::error(name() + " cannot trace kernels (timelines need the CUDA executor)");
  }

protected:
  // setSequenceLength()'s length for a sequence slot (0 outside the plan's slots).
  int forwardEnd(int sequence) const {
    return sequence >= 0 && sequence < int(std::size(forwardEnds_)) ? forwardEnds_[sequence] : 0;
  }

private:
  int forwardEnds_[kMaxBatch] = {};
};

// Hooks into the CPU executor for the compiler's calibration (activation
// statistics, per-tensor sensitivity). Called on the executor's thread, in op
// order; the pointers are valid only during the call.
class CpuObserver {
public:
  virtual ~CpuObserver() = default;
  // Before Linear op `opIndex` (an index into the plan's ops) runs: all n rows
  // of its input, `width` floats each (lm_head too, though it computes only the
  // last row).
  virtual void linearInput(int opIndex, const float* rows, int n, int width) = 0;
  // The f32 weights (Linear) or table (Embedding) op `opIndex` is about to use;
  // an override returns other values of the same shape to run with instead.
  virtual const float* weight(int opIndex, const float* values) { return values; }
  // Before op `opIndex` runs, with the activation arena (`floats` values; every
  // activation buffer lies in it): the observer may save it or overwrite it.
  // Returning false skips the op; the observer then vouches that what the op
  // would write is already in the arena (e.g. restored from an earlier step
  // over the same tokens), so a step can resume in the middle of the model.
  virtual bool beforeOp(int opIndex, float* arena, size_t floats) { return true; }
};

// threads <= 0: use all hardware threads. observer: optional, not owned, must
// outlive the executor.
Result<std::unique_ptr<Executor>> createCpuExecutor(const PlanFile& plan, int threads,
                                                    CpuObserver* observer = nullptr);
// Loads libcuda.so.1 with dlopen; fails cleanly on machines without a GPU.
Result<std::unique_ptr<Executor>> createCudaExecutor(const PlanFile& plan, int deviceOrdinal);

} // namespace ninfer
