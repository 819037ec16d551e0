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

#endif // NINFER_PASSES_TD
