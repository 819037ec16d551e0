// ninfer-plan-memory: first-fit arena slots by liveness, in-place rope/add/
// rms_norm when operand 0 dies there. With max-step-tokens=4 a slot is
// 4 rows * width * 4 bytes: width 32 -> 512, 64 -> 1024, 128 -> 2048.
// RUN: ninfer-opt %s --split-input-file --ninfer-plan-memory="max-step-tokens=4" | FileCheck %s

// One transformer layer. Offsets worked by hand (live slots after each op):
//  x 0 | n1 1024 | q 2048 | k 3072 | v 3584, n1 freed | qr = q, kr = k in place
//  o: first gap of 1024 is n1's old slot -> 1024; qr, kr, v freed
//  p 2048 (o still live while p is written), o freed | h = x in place (0)
//  n2 1024 (h is read again later, so no in place) | g 2048 | u 4096, n2 freed
//  s: gaps [1024,2048) too small, [2048..6144) held by g, u -> 6144; g, u freed
//  d: first gap of 1024 -> 1024 | h2 = h in place | n3 = h2 in place
// Peak is s at 6144 + 2048 = 8192 bytes (17 values, 1024..2048 each, unshared).

// CHECK: module attributes {ninfer.activation_bytes = 8192 : i64, ninfer.max_step_tokens = 4 : i64}
// CHECK-LABEL: func.func @forward
func.func @forward(%tokens: tensor<?xi32>) -> tensor<1xi32> {
  %table = ninfer.weight "embed" : tensor<128x64xbf16>
  %w1 = ninfer.weight "norm1" : tensor<64xbf16>
  %w2 = ninfer.weight "norm2" : tensor<64xbf16>
  %wn = ninfer.weight "norm" : tensor<64xbf16>
  %wq = ninfer.weight "wq" : tensor<64x64xbf16>
  %wk = ninfer.weight "wk" : tensor<32x64xbf16>
  %wo = ninfer.weight "wo" : tensor<64x64xbf16>
  %wg = ninfer.weight "wg" : tensor<128x64xbf16>
  %wd = ninfer.weight "wd" : tensor<64x128xbf16>
  %f = ninfer.weight "inv_freq" : tensor<16xf32>
  // CHECK: ninfer.embedding {{.*}}ninfer.arena_offset = 0 : i64
  %x = ninfer.embedding %tokens, %table : (tensor<?xi32>, tensor<128x64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.rms_norm {{.*}}ninfer.arena_offset = 1024 : i64
  %n1 = ninfer.rms_norm %x, %w1 {eps = 1.0e-05 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 2048 : i64
  %q = ninfer.linear %n1, %wq : (tensor<?x64xf32>, tensor<64x64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 3072 : i64
  %k = ninfer.linear %n1, %wk : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 3584 : i64
  %v = ninfer.linear %n1, %wk : (tensor<?x64xf32>, tensor<32x64xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.rope {{.*}}ninfer.arena_offset = 2048 : i64
  %qr = ninfer.rope %q, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<16xf32>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.rope {{.*}}ninfer.arena_offset = 3072 : i64
  %kr = ninfer.rope %k, %f {heads = 1 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x32xf32>, tensor<16xf32>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.attention {{.*}}ninfer.arena_offset = 1024 : i64
  %o = ninfer.attention %qr, %kr, %v {layer = 0 : i32, heads = 2 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 2048 : i64
  %p = ninfer.linear %o, %wo : (tensor<?x64xf32>, tensor<64x64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.add {{.*}}ninfer.arena_offset = 0 : i64
  %h = ninfer.add %x, %p : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.rms_norm {{.*}}ninfer.arena_offset = 1024 : i64
  %n2 = ninfer.rms_norm %h, %w2 {eps = 1.0e-05 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 2048 : i64
  %g = ninfer.linear %n2, %wg : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x128xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 4096 : i64
  %u = ninfer.linear %n2, %wg : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x128xf32>
  // CHECK-NEXT: ninfer.swiglu {{.*}}ninfer.arena_offset = 6144 : i64
  %s = ninfer.swiglu %g, %u : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 1024 : i64
  %d = ninfer.linear %s, %wd : (tensor<?x128xf32>, tensor<64x128xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.add {{.*}}ninfer.arena_offset = 0 : i64
  %h2 = ninfer.add %h, %d : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  // CHECK-NEXT: ninfer.rms_norm {{.*}}ninfer.arena_offset = 0 : i64
  %n3 = ninfer.rms_norm %h2, %wn {eps = 1.0e-05 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  // The logits are the runtime's logits buffer, not an arena slot.
  // CHECK-NEXT: ninfer.lm_head
  // CHECK-NOT: arena_offset
  // CHECK-SAME: -> tensor<1x128xf32>
  %l = ninfer.lm_head %n3, %table : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<1x128xf32>
  %t = ninfer.sample %l : (tensor<1x128xf32>) -> tensor<1xi32>
  return %t : tensor<1xi32>
}

// -----

// A result nobody reads still gets a slot to be written to, freed at once; an
// add whose operand 1 (not 0) dies is not in place; width 32 slots are 512.
// Peak: x 0, y 512, a 1024 live together -> 1536 bytes.
// CHECK: module attributes {ninfer.activation_bytes = 1536 : i64
// CHECK-LABEL: func.func @dead_and_operand_one
func.func @dead_and_operand_one(%tokens: tensor<?xi32>) -> tensor<1xi32> {
  %table = ninfer.weight "embed" : tensor<16x32xbf16>
  %w = ninfer.weight "w" : tensor<32x32xbf16>
  // CHECK: ninfer.embedding {{.*}}ninfer.arena_offset = 0 : i64
  %x = ninfer.embedding %tokens, %table : (tensor<?xi32>, tensor<16x32xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 512 : i64
  %dead = ninfer.linear %x, %w : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 512 : i64
  %y = ninfer.linear %x, %w : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  // x is read again below, y dies here: a new slot.
  // CHECK-NEXT: ninfer.add {{.*}}ninfer.arena_offset = 1024 : i64
  %a = ninfer.add %x, %y : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // a is operand 1 and dies here, x is operand 0 and dies here too: in place on x.
  // CHECK-NEXT: ninfer.add {{.*}}ninfer.arena_offset = 0 : i64
  %b = ninfer.add %x, %a : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // A linear never writes in place: b is still being read.
  // CHECK-NEXT: ninfer.linear {{.*}}ninfer.arena_offset = 512 : i64
  %c = ninfer.linear %b, %w : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  %l = ninfer.lm_head %c, %table : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<1x16xf32>
  %t = ninfer.sample %l : (tensor<1x16xf32>) -> tensor<1xi32>
  return %t : tensor<1xi32>
}
