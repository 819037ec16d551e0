// Every ninfer op parses, verifies and prints back to a form that parses again,
// in both the custom and the generic syntax.
// RUN: ninfer-opt %s | ninfer-opt | FileCheck %s
// RUN: ninfer-opt %s --mlir-print-op-generic | ninfer-opt | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[TOK:.*]]: tensor<?xi32>) -> tensor<1xi32>
func.func @forward(%tokens: tensor<?xi32>) -> tensor<1xi32> {
  // CHECK: %[[TABLE:.*]] = ninfer.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
  %table = ninfer.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
  // CHECK: %[[X:.*]] = ninfer.embedding %[[TOK]], %[[TABLE]] : (tensor<?xi32>, tensor<128x64xbf16>) -> tensor<?x64xf32>
  %x = ninfer.embedding %tokens, %table : (tensor<?xi32>, tensor<128x64xbf16>) -> tensor<?x64xf32>
  %nw = ninfer.weight "model.layers.0.input_layernorm.weight" : tensor<64xf16>
  // CHECK: ninfer.rms_norm %[[X]], %{{.*}} {eps = 9.99999997E-7 : f32} : (tensor<?x64xf32>, tensor<64xf16>) -> tensor<?x64xf32>
  %n = ninfer.rms_norm %x, %nw {eps = 1.0e-06 : f32} : (tensor<?x64xf32>, tensor<64xf16>) -> tensor<?x64xf32>
  %wq = ninfer.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
  %bq = ninfer.weight "model.layers.0.self_attn.q_proj.bias" : tensor<64xbf16>
  // CHECK: ninfer.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<?x64xf32>
  %q = ninfer.linear %n, %wq, %bq : (tensor<?x64xf32>, tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<?x64xf32>
  %wk = ninfer.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
  // CHECK: ninfer.linear %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %k = ninfer.linear %n, %wk : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %v = ninfer.linear %n, %wk : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %qnw = ninfer.weight "model.layers.0.self_attn.q_norm.weight" : tensor<32xbf16>
  // Per-head norm: D = head_dim = 32 over a width of 64.
  // CHECK: ninfer.rms_norm %{{.*}}, %{{.*}} {eps = 9.99999997E-7 : f32} : (tensor<?x64xf32>, tensor<32xbf16>) -> tensor<?x64xf32>
  %qn = ninfer.rms_norm %q, %qnw {eps = 1.0e-06 : f32} : (tensor<?x64xf32>, tensor<32xbf16>) -> tensor<?x64xf32>
  %f = ninfer.weight "rope.inv_freq" : tensor<16xf32>
  // CHECK: ninfer.rope %{{.*}}, %{{.*}} {attention_factor = 1.000000e+00 : f32, dynamic_factor = 0.000000e+00 : f32, head_dim = 32 : i32, heads = 2 : i32, original_max_positions = 0 : i32, theta = 1.000000e+04 : f32} : (tensor<?x64xf32>, tensor<16xf32>) -> tensor<?x64xf32>
  %qr = ninfer.rope %qn, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<16xf32>) -> tensor<?x64xf32>
  %kr = ninfer.rope %k, %f {heads = 1 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 2.0 : f32, original_max_positions = 2048 : i32}
      : (tensor<?x32xf32>, tensor<16xf32>) -> tensor<?x32xf32>
  // CHECK: ninfer.attention %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 32 : i32, heads = 2 : i32, kv_heads = 1 : i32, layer = 0 : i32, scale = 0.176776692 : f32, window = 4096 : i32} : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  %o = ninfer.attention %qr, %kr, %v {layer = 0 : i32, heads = 2 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 4096 : i32, scale = 0.176776695 : f32}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  %wg = ninfer.weight "model.layers.0.mlp.gate_proj.weight" : tensor<128x64xbf16>
  %g = ninfer.linear %o, %wg : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x128xf32>
  // CHECK: ninfer.swiglu %{{.*}}, %{{.*}} : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  %s = ninfer.swiglu %g, %g : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  %wd = ninfer.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x128xbf16>
  %d = ninfer.linear %s, %wd : (tensor<?x128xf32>, tensor<64x128xbf16>) -> tensor<?x64xf32>
  // CHECK: ninfer.add %[[X]], %{{.*}} : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %h = ninfer.add %x, %d : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK: %[[L:.*]] = ninfer.lm_head %{{.*}}, %[[TABLE]] : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<1x128xf32>
  %l = ninfer.lm_head %h, %table : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<1x128xf32>
  // CHECK: %[[T:.*]] = ninfer.sample %[[L]] : (tensor<1x128xf32>) -> tensor<1xi32>
  %t = ninfer.sample %l : (tensor<1x128xf32>) -> tensor<1xi32>
  // CHECK: return %[[T]] : tensor<1xi32>
  return %t : tensor<1xi32>
}
