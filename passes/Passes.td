// Passes of the ninfer compiler, with their typed options. The order they run
// in lives in Pipelines.cpp only.
#ifndef NINFER_PASSES_TD
#define NINFER_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanMemory : Pass<"ninfer-plan-memory", "mlir::ModuleOp"> {
  let summary = "assign activation arena offsets by liveness";
  let description = [{
    Every activation value (results of embedding, rms_norm, linear, rope,
    attention, swiglu, add) gets a slot of `max_step_tokens * width * 4`
    bytes, rounded up to 256, in one activation arena. Slots of values that
    are dead are reused (first fit). rope, add and rms_norm write in place
    when their operand 0 dies at that op. The offset is recorded on the
    defining op, the arena size on the module:

    ```mlir
    // before
    %x = ninfer.embedding %tokens, %table : (...) -> tensor<?x64xf32>
    %y = ninfer.rms_norm %x, %w {eps = 1.0e-05 : f32} : (...) -> tensor<?x64xf32>
    // after (max-step-tokens=4: 4 * 64 * 4 = 1024 bytes per slot)
    %x = ninfer.embedding ... {ninfer.arena_offset = 0 : i64}
    %y = ninfer.rms_norm ... {eps = 1.0e-05 : f32, ninfer.arena_offset = 0 : i64}
    module attributes {ninfer.activation_bytes = 1024 : i64, ninfer.max_step_tokens = 4 : i64}
    ```

    The logits of lm_head are the runtime's logits buffer, not in the arena.
  }];
  let options = [
    Option<"maxStepTokens", "max-step-tokens", "int64_t", /*default=*/"512",
           "rows of every activation buffer (the largest prefill chunk)">,
  ];
  let dependentDialects = ["::ninfer::NinferDialect"];
}

def Quantize : Pass<"ninfer-quantize", "mlir::ModuleOp"> {
  let summary = "quantize linear, lm_head and embedding weights to group formats";
  let description = [{
    Every weight read by `ninfer.linear`, `ninfer.lm_head` or
    `ninfer.embedding` (columns a multiple of 128) is quantized to a format of
    ninfer/QuantFormats.h: GPTQ on the calibration Hessian H = X^T X of its
    input (RTN for the embedding table, or with method=rtn), one format for all
    (bits, group) or, with bpw > 0, one per tensor chosen by the exact bit
    allocator so that every weight byte of the model (norms, embeddings and
    scales included) fits the budget, each tensor's relative output error
    weighted by its measured sensitivity (KL divergence on calibration text with
    only that tensor quantized). The packed bytes replace the tensor in the
    weight store; the op keeps its logical type and is marked:
    ```mlir
    // before
    %w = ninfer.weight "model.layers.0.mlp.up_proj.weight" : tensor<1536x512xbf16>
    // after
    %w = ninfer.weight "model.layers.0.mlp.up_proj.weight"
        {ninfer.storage = "q4_g64"} : tensor<1536x512xbf16>
    ```
    With awq, q/k/v and gate/up are scaled per input channel (AWQ search) and
    the RMSNorm that feeds them reads a new f32 weight g / s
    ("<norm>.weight.awq"), which leaves the float function unchanged.
    The weights and statistics live outside the IR: the compiler creates this
    pass with createQuantizePass() (passes/Quantize.h); created from the
    command line it has no weight store and fails.
  }];
  let options = [
    Option<"method", "method", "std::string", /*default=*/"\"gptq\"", "gptq or rtn">,
    Option<"bits", "bits", "int", /*default=*/"4", "uniform format bits: 8, 6, 5, 4, 3 or 2">,
    Option<"group", "group", "int", /*default=*/"64", "values per fp16 scale: 32, 64, 128">,
    Option<"bpw", "bpw", "double", /*default=*/"0.0",
           "mixed formats to this many bits per weight (0: uniform)">,
    Option<"awq", "awq", "bool", /*default=*/"false", "AWQ scales folded into RMSNorm">,
  ];
  let dependentDialects = ["::ninfer::NinferDialect"];
}

#endif // NINFER_PASSES_TD
