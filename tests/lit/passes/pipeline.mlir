// The full pipeline (as ninferc runs it): unused pure ops are dropped before
// memory planning, so they take no arena slot; a weight referenced twice by
// name becomes one op (tied embeddings); attention stays even when its result
// is unused, because it writes the KV cache.
// RUN: ninfer-opt %s --ninfer-pipeline="max-step-tokens=2" | FileCheck %s

// Slots: width 32 -> 2 * 32 * 4 = 256 bytes.
// x 0 | dead linear removed | q 256 | attention 512 (unused, freed at once)
// | h = x + q in place at 0 | peak 768.
// CHECK: module attributes {ninfer.activation_bytes = 768 : i64, ninfer.max_step_tokens = 2 : i64}
// CHECK-LABEL: func.func @forward
func.func @forward(%tokens: tensor<?xi32>) -> tensor<1xi32> {
  // CHECK-COUNT-1: ninfer.weight "model.embed_tokens.weight"
  // CHECK-NOT: ninfer.weight "model.embed_tokens.weight"
  // CHECK-NOT: "unused"
  %table = ninfer.weight "model.embed_tokens.weight" : tensor<16x32xbf16>
  %w = ninfer.weight "w" : tensor<32x32xbf16>
  %unused = ninfer.weight "unused" : tensor<32x32xbf16>
  // CHECK: ninfer.embedding {{.*}}ninfer.arena_offset = 0 : i64
  %x = ninfer.embedding %tokens, %table : (tensor<?xi32>, tensor<16x32xbf16>) -> tensor<?x32xf32>
  %dead = ninfer.linear %x, %unused : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 256 : i64
  %q = ninfer.linear %x, %w : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.attention {{.*}}ninfer.arena_offset = 512 : i64
  %o = ninfer.attention %q, %q, %q {layer = 0 : i32, heads = 1 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.add {{.*}}ninfer.arena_offset = 0 : i64
  %h = ninfer.add %x, %q : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %table2 = ninfer.weight "model.embed_tokens.weight" : tensor<16x32xbf16>
  // CHECK-NEXT: ninfer.lm_head
  %l = ninfer.lm_head %h, %table2 : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<1x16xf32>
  %t = ninfer.sample %l : (tensor<1x16xf32>) -> tensor<1xi32>
  return %t : tensor<1xi32>
}
