// The kernel ABI shared by generated device code and the CUDA executor.
// Every generated kernel has the signature
//   extern "C" __global__ void fn(const ninfer::StepState* state, ninfer::KernelArgs args)
// where args.buffers[k] is the device address of the plan buffer named by the
// launch's args[k] (resolved once when the plan is loaded) and state lives in
// device memory, written once per step. Because buffer addresses are
// arguments, ops of the same shape (every layer of a model) share one kernel.
// Nothing here may include a standard header: NVRTC compiles this file as an
// in-memory header.
#pragma once

#include "HostDevice.h"

namespace ninfer {

// Most sequences one batch step decodes (the decode GEMV's rows, kLinearGemvMaxRows).
constexpr int kMaxBatch = 8;

// A step is one of two kinds:
//  - single-sequence (batch == 0): nTokens tokens of sequence `seq` at
//    positions pos..pos+nTokens-1 (prefill chunks, and decode of one sequence);
//  - batch (batch == nTokens > 0): row t is one token of sequence rowSeq[t] at
//    position rowPos[t]; the sequences of a step are distinct.
// Row t of every activation belongs to the step's token t either way; only
// RoPE, the KV cache and attention (and the lm_head, which computes every row
// of a batch step) look at which sequence and position a row has.
struct StepState {
  int pos;     // single-sequence step: position of the first token
  int nTokens; // rows in this step
  int seq;     // single-sequence step: the KV-cache slot (0 in plans of one sequence)
  int batch;   // 0: single-sequence step; else the sequences of a batch step (= nTokens)
  int rowPos[kMaxBatch];
  int rowSeq[kMaxBatch];
  // Row t's uniform in [0, 1) for temperature sampling on the device (Sampler::nextUniform,
  // read by ninfer_sample_rows only). After the fields above, which plans' kernels read.
  double uniform[kMaxBatch];
  // Single-sequence step: the length of the forward pass it is a chunk of
  // (Executor::setSequenceLength; 0: the step's own end). Last, for plans compiled before it.
  int forwardEnd;
};

// Position of row t's token.
NINFER_HD inline int stepPosition(const StepState* s, int t) {
  return s->batch ? s->rowPos[t] : s->pos + t;
}

// KV-cache slot of row t's sequence.
NINFER_HD inline int stepSequence(const StepState* s, int t) {
  return s->batch ? s->rowSeq[t] : s->seq;
}

// Length of row t's sequence as far as this forward takes it (dynamic NTK RoPE rescales
// from it, LongRoPE picks its factors by it): a batch row ends its sequence; a
// single-sequence step's rows all see the end of the forward pass the step is a chunk of
// (at least the step's own end), as transformers does for one forward call over the
// whole prompt.
NINFER_HD inline int stepSequenceEnd(const StepState* s, int t) {
  if (s->batch)
    return s->rowPos[t] + 1;
  const int end = s->pos + s->nTokens;
  return s->forwardEnd > end ? s->forwardEnd : end;
}

constexpr int kMaxKernelArgs = 16;

// Greedy sampling on the device (codegen/kernels/argmax.cuh, ninfer_argmax_rows): grid
// (kArgmaxSlices, rows), block kArgmaxThreads, and per row kArgmaxSlices partial bests of
// 8 bytes and a ticket.
constexpr int kArgmaxSlices = 32;
constexpr int kArgmaxThreads = 256;

// Top-k sampling's candidates on the device (codegen/kernels/topk.cuh, ninfer_topk_rows):
// at most kMaxTopKCandidates per row; a block sorts a slice of at most kTopKSliceValues
// logits, and the merge as many of the slices' bests (so slices x k <= kTopKSliceValues).
constexpr int kMaxTopKCandidates = 64;
constexpr int kTopKSliceValues = 4096;
constexpr int kTopKThreads = 256;

// Temperature sampling on the device (codegen/kernels/sample.cuh, ninfer_sample_rows): after
// ninfer_argmax_rows of the same rows, the same grid and block; per row kArgmaxSlices partial
// sums (8 bytes) and last non-NaN ids (4 bytes), a ticket, and the picked id.

// Top-p's draw over a whole row on the device (codegen/kernels/nucleus.cuh,
// ninfer_nucleus_grid): a cooperative launch of at most kNucleusMaxBlocks blocks (and at most
// one per SM) of kNucleusThreads, each a slice of the row, and kNucleusScratchBytes of the
// executor's (zero at load; the kernel leaves it zero): its grid barrier's counters and the
// 256 bins per block that the blocks exchange, twice over.
constexpr int kNucleusThreads = 512;
constexpr int kNucleusMaxBlocks = 32;
constexpr int kNucleusScratchBytes = 16 + 2 * kNucleusMaxBlocks * 256 * (8 + 4);

struct KernelArgs {
  void* buffers[kMaxKernelArgs];
};

} // namespace ninfer
