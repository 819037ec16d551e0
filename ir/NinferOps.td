// Operations of the ninfer dialect. Every op checks the shapes that the plan
// builder and the kernels rely on, so a malformed program is rejected here and
// never reaches code generation.
#ifndef NINFER_OPS_TD
#define NINFER_OPS_TD

include "NinferDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// [tokens, width] f32; the token dimension is dynamic in a model program.
def Ninfer_Activation : 2DTensorOf<[F32]>;
// Weights keep the checkpoint dtype; i32 for integer side tables.
def Ninfer_WeightTensor : RankedTensorOf<[BF16, F16, F32, I32]>;
def Ninfer_Matrix : 2DTensorOf<[BF16, F16, F32]>;
def Ninfer_Vector : 1DTensorOf<[BF16, F16, F32]>;
def Ninfer_Tokens : 1DTensorOf<[I32]>;

// The per-layer key/value cache that attention appends to.
def Ninfer_KvCacheResource : Resource<"::ninfer::KvCacheResource">;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

def Ninfer_WeightOp : Ninfer_Op<"weight", [Pure]> {
  let summary = "a tensor of the weight store, referenced by name";
  let description = [{
    Names an entry of the compiler's weight store. The bytes never enter the
    IR; the plan builder looks the name up when it lays out the weight area.
    Two weight ops with the same name are the same tensor (CSE merges them,
    e.g. tied embeddings).

    ```mlir
    %w = ninfer.weight "model.layers.0.mlp.up_proj.weight" : tensor<1536x512xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Ninfer_WeightTensor:$output);
  let assemblyFormat = "$name attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def Ninfer_EmbeddingOp : Ninfer_Op<"embedding", [Pure]> {
  let summary = "gathers one table row per token";
  let description = [{
    `out[t, :] = table[tokens[t], :]`, converted to f32.

    ```mlir
    %x = ninfer.embedding %tokens, %table
        : (tensor<?xi32>, tensor<4096x512xbf16>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Ninfer_Tokens:$tokens, Ninfer_Matrix:$table);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$tokens `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_RmsNormOp : Ninfer_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalization over groups of D values";
  let description = [{
    `out = x / sqrt(mean(x^2) + eps) * weight`, over consecutive groups of
    D values where D is the size of `weight`; the width must be a multiple of
    D. D = width normalizes the hidden state, D = head_dim gives qwen3's
    per-head q/k norms on a `[?, heads * head_dim]` tensor.

    ```mlir
    %y = ninfer.rms_norm %x, %w {eps = 1.0e-05 : f32}
        : (tensor<?x512xf32>, tensor<512xbf16>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$input, Ninfer_Vector:$weight, F32Attr:$eps);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_LinearOp : Ninfer_Op<"linear", [Pure]> {
  let summary = "x * W^T (+ bias), W stored [out_features, in_features]";
  let description = [{
    `out[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n])`.

    ```mlir
    %y = ninfer.linear %x, %w
        : (tensor<?x512xf32>, tensor<1536x512xbf16>) -> tensor<?x1536xf32>
    %z = ninfer.linear %x, %w, %b
        : (tensor<?x512xf32>, tensor<1536x512xbf16>, tensor<1536xbf16>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$input, Ninfer_Matrix:$weight,
                       Optional<Ninfer_Vector>:$bias);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat =
      "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_RopeOp : Ninfer_Op<"rope", [Pure]> {
  let summary = "rotate-half rotary position embedding";
  let description = [{
    Rotates each of `heads` groups of `head_dim` values of every token row by
    angles `position * inv_freq`. `inv_freq` (f32, head_dim/2 values) already
    holds linear/llama3/yarn scaling; cos/sin are multiplied by
    `attention_factor`. `dynamic_factor > 0` selects dynamic NTK scaling
    beyond `original_max_positions`, recomputed from `theta` at run time.
    LongRoPE: `inv_freq` holds head_dim values, the short factors' table and
    then the long factors', which rotates once the sequence runs past
    `original_max_positions`.

    ```mlir
    %y = ninfer.rope %x, %inv_freq {heads = 8 : i32, head_dim = 64 : i32,
        attention_factor = 1.0 : f32, theta = 10000.0 : f32,
        dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
        : (tensor<?x512xf32>, tensor<32xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$input, 1DTensorOf<[F32]>:$inv_freq,
                       I32Attr:$heads, I32Attr:$head_dim, F32Attr:$attention_factor,
                       F32Attr:$theta, F32Attr:$dynamic_factor,
                       I32Attr:$original_max_positions);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$input `,` $inv_freq attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_AttentionOp : Ninfer_Op<"attention",
    [MemoryEffects<[MemRead<Ninfer_KvCacheResource>, MemWrite<Ninfer_KvCacheResource>]>]> {
  let summary = "appends k, v to the layer's KV cache, then causal GQA attention";
  let description = [{
    Writes the step's k and v rows to the KV cache of `layer`, then attends
    each query head over all cached positions up to its own (causal). Query
    head h reads kv head `h / (heads / kv_heads)`. `window > 0` masks keys
    older than `window` positions; 0 means full attention. Not Pure: it
    writes the cache, so it must never be removed or reordered.

    ```mlir
    %o = ninfer.attention %q, %k, %v {layer = 0 : i32, heads = 8 : i32,
        kv_heads = 4 : i32, head_dim = 64 : i32, window = 0 : i32, scale = 0.125 : f32}
        : (tensor<?x512xf32>, tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$q, Ninfer_Activation:$k, Ninfer_Activation:$v,
                       I32Attr:$layer, I32Attr:$heads, I32Attr:$kv_heads, I32Attr:$head_dim,
                       I32Attr:$window, F32Attr:$scale);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$q `,` $k `,` $v attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_SwiGluOp : Ninfer_Op<"swiglu", [Pure]> {
  let summary = "silu(gate) * up";
  let description = [{
    ```mlir
    %y = ninfer.swiglu %gate, %up
        : (tensor<?x1536xf32>, tensor<?x1536xf32>) -> tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$gate, Ninfer_Activation:$up);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$gate `,` $up attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_AddOp : Ninfer_Op<"add", [Pure]> {
  let summary = "elementwise sum (residual connection)";
  let description = [{
    ```mlir
    %y = ninfer.add %a, %b
        : (tensor<?x512xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$lhs, Ninfer_Activation:$rhs);
  let results = (outs Ninfer_Activation:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_LmHeadOp : Ninfer_Op<"lm_head", [Pure]> {
  let summary = "projects the last token row to vocabulary logits";
  let description = [{
    Only the step's last row is needed for the next token, so only it is
    computed: the result has one row of `vocab` logits.

    ```mlir
    %l = ninfer.lm_head %x, %w
        : (tensor<?x512xf32>, tensor<4096x512xbf16>) -> tensor<1x4096xf32>
    ```
  }];
  let arguments = (ins Ninfer_Activation:$input, Ninfer_Matrix:$weight);
  let results = (outs 2DTensorOf<[F32]>:$logits);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Ninfer_SampleOp : Ninfer_Op<"sample", [Pure]> {
  let summary = "the next token id, chosen by the runtime's sampler";
  let description = [{
    Marks the logits the runtime samples from; the sampling settings are a
    run-time choice, so no kernel is generated for it.

    ```mlir
    %t = ninfer.sample %l : (tensor<1x4096xf32>) -> tensor<1xi32>
    ```
  }];
  let arguments = (ins 2DTensorOf<[F32]>:$logits);
  let results = (outs 1DTensorOf<[I32]>:$token);
  let assemblyFormat = "$logits attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // NINFER_OPS_TD
