// The ninfer dialect: one model step (prefill chunk or decode token) as a
// straight-line program over ranked tensors. Weights are referenced by name
// (entries of the compiler's weight store), never embedded as attributes.
#ifndef NINFER_DIALECT_TD
#define NINFER_DIALECT_TD

include "mlir/IR/OpBase.td"

def Ninfer_Dialect : Dialect {
  let name = "ninfer";
  let cppNamespace = "::ninfer";
  let summary = "LLM inference step operations for the ninfer compiler";
  let description = [{
    A program is one `func.func @forward(%tokens: tensor<?xi32>) -> tensor<1xi32>`.
    Activations are f32 tensors `[tokens, width]` whose token dimension is
    dynamic; weights keep the checkpoint dtype (bf16/f16/f32). Memory planning
    annotates activation-producing ops with `ninfer.arena_offset`, and the
    module with `ninfer.activation_bytes` and `ninfer.max_step_tokens`.
  }];
}

class Ninfer_Op<string mnemonic, list<Trait> traits = []>
    : Op<Ninfer_Dialect, mnemonic, traits>;

#endif // NINFER_DIALECT_TD
