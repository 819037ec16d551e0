// Each verifier rule of the ninfer ops rejects a malformed op with a message
// that names the mismatch.
// RUN: ninfer-opt %s --split-input-file --verify-diagnostics

func.func @weight_empty_name() {
  // expected-error @+1 {{weight name must not be empty}}
  %w = ninfer.weight "" : tensor<4x4xbf16>
  return
}

// -----

func.func @weight_dynamic(%t: tensor<?xi32>) {
  // expected-error @+1 {{weight must have a static shape}}
  %w = ninfer.weight "w" : tensor<?x4xbf16>
  return
}

// -----

func.func @embedding_width(%t: tensor<?xi32>) {
  %table = ninfer.weight "table" : tensor<100x64xbf16>
  // expected-error @+1 {{result width 32 != table width 64}}
  %x = ninfer.embedding %t, %table : (tensor<?xi32>, tensor<100x64xbf16>) -> tensor<?x32xf32>
  return
}

// -----

func.func @activation_not_f32(%x: tensor<?x64xf16>) {
  %w = ninfer.weight "w" : tensor<64xbf16>
  // expected-error @+1 {{operand #0 must be 2D tensor of 32-bit float values}}
  %y = ninfer.rms_norm %x, %w {eps = 1.0e-05 : f32} : (tensor<?x64xf16>, tensor<64xbf16>) -> tensor<?x64xf32>
  return
}

// -----

func.func @activation_dynamic_width(%x: tensor<?x?xf32>) {
  %w = ninfer.weight "w" : tensor<64xbf16>
  // expected-error @+1 {{input width must be static and positive}}
  %y = ninfer.rms_norm %x, %w {eps = 1.0e-05 : f32} : (tensor<?x?xf32>, tensor<64xbf16>) -> tensor<?x?xf32>
  return
}

// -----

func.func @rms_norm_group(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<48xbf16>
  // expected-error @+1 {{input width 64 is not a multiple of the weight size 48}}
  %y = ninfer.rms_norm %x, %w {eps = 1.0e-05 : f32} : (tensor<?x64xf32>, tensor<48xbf16>) -> tensor<?x64xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<64xbf16>
  // expected-error @+1 {{'eps' must be positive}}
  %y = ninfer.rms_norm %x, %w {eps = 0.0 : f32} : (tensor<?x64xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_in_features(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<128x32xbf16>
  // expected-error @+1 {{input width 64 != weight in_features (dim 1) 32}}
  %y = ninfer.linear %x, %w : (tensor<?x64xf32>, tensor<128x32xbf16>) -> tensor<?x128xf32>
  return
}

// -----

func.func @linear_out_features(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<128x64xbf16>
  // expected-error @+1 {{result width 64 != weight out_features (dim 0) 128}}
  %y = ninfer.linear %x, %w : (tensor<?x64xf32>, tensor<128x64xbf16>) -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<128x64xbf16>
  %b = ninfer.weight "b" : tensor<64xbf16>
  // expected-error @+1 {{bias size 64 != out_features 128}}
  %y = ninfer.linear %x, %w, %b : (tensor<?x64xf32>, tensor<128x64xbf16>, tensor<64xbf16>) -> tensor<?x128xf32>
  return
}

// -----

func.func @linear_rows(%x: tensor<4x64xf32>) {
  %w = ninfer.weight "w" : tensor<128x64xbf16>
  // expected-error @+1 {{result rows 5 != input rows 4}}
  %y = ninfer.linear %x, %w : (tensor<4x64xf32>, tensor<128x64xbf16>) -> tensor<5x128xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<?x66xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<16xf32>
  // expected-error @+1 {{head_dim must be even, got 33}}
  %y = ninfer.rope %x, %f {heads = 2 : i32, head_dim = 33 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x66xf32>, tensor<16xf32>) -> tensor<?x66xf32>
  return
}

// -----

func.func @rope_width(%x: tensor<?x64xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<16xf32>
  // expected-error @+1 {{heads * head_dim = 96 != input width 64}}
  %y = ninfer.rope %x, %f {heads = 3 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<16xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @rope_inv_freq_size(%x: tensor<?x64xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<24xf32>
  // expected-error @+1 {{inv_freq size 24 is neither head_dim / 2 = 16 nor head_dim (LongRoPE's two tables)}}
  %y = ninfer.rope %x, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<24xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @rope_long_factors_need_original_length(%x: tensor<?x64xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<32xf32>
  // expected-error @+1 {{LongRoPE's two tables need 'original_max_positions' > 0 and no dynamic NTK scaling}}
  %y = ninfer.rope %x, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<32xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @rope_inv_freq_dtype(%x: tensor<?x64xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<16xbf16>
  // expected-error @+1 {{operand #1 must be 1D tensor of 32-bit float values}}
  %y = ninfer.rope %x, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 0.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<16xbf16>) -> tensor<?x64xf32>
  return
}

// -----

func.func @rope_dynamic_needs_original(%x: tensor<?x64xf32>) {
  %f = ninfer.weight "inv_freq" : tensor<16xf32>
  // expected-error @+1 {{dynamic NTK scaling needs 'original_max_positions' > 0}}
  %y = ninfer.rope %x, %f {heads = 2 : i32, head_dim = 32 : i32, attention_factor = 1.0 : f32,
      theta = 10000.0 : f32, dynamic_factor = 2.0 : f32, original_max_positions = 0 : i32}
      : (tensor<?x64xf32>, tensor<16xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @attention_kv_heads_divide(%q: tensor<?x96xf32>, %k: tensor<?x64xf32>) {
  // expected-error @+1 {{kv_heads 2 does not divide heads 3}}
  %o = ninfer.attention %q, %k, %k {layer = 0 : i32, heads = 3 : i32, kv_heads = 2 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x96xf32>, tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x96xf32>
  return
}

// -----

func.func @attention_q_width(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>) {
  // expected-error @+1 {{heads * head_dim = 128 != q width 64}}
  %o = ninfer.attention %q, %k, %k {layer = 0 : i32, heads = 4 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @attention_k_width(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>) {
  // expected-error @+1 {{kv_heads * head_dim = 32 != k width 64}}
  %o = ninfer.attention %q, %k, %k {layer = 0 : i32, heads = 2 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @attention_v_width(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x64xf32>) {
  // expected-error @+1 {{v type 'tensor<?x64xf32>' does not match 'tensor<?x32xf32>'}}
  %o = ninfer.attention %q, %k, %v {layer = 0 : i32, heads = 2 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = 0 : i32, scale = 0.125 : f32}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>) {
  // expected-error @+1 {{'window' must not be negative}}
  %o = ninfer.attention %q, %k, %k {layer = 0 : i32, heads = 2 : i32, kv_heads = 1 : i32,
      head_dim = 32 : i32, window = -1 : i32, scale = 0.125 : f32}
      : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @swiglu_mismatch(%g: tensor<?x128xf32>, %u: tensor<?x64xf32>) {
  // expected-error @+1 {{up type 'tensor<?x64xf32>' does not match 'tensor<?x128xf32>'}}
  %y = ninfer.swiglu %g, %u : (tensor<?x128xf32>, tensor<?x64xf32>) -> tensor<?x128xf32>
  return
}

// -----

func.func @add_result(%a: tensor<?x64xf32>) {
  // expected-error @+1 {{result type 'tensor<?x32xf32>' does not match 'tensor<?x64xf32>'}}
  %y = ninfer.add %a, %a : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @lm_head_rows(%x: tensor<?x64xf32>) {
  %w = ninfer.weight "w" : tensor<100x64xbf16>
  // expected-error @+1 {{result must be tensor<1x100xf32> (one row of vocab logits)}}
  %l = ninfer.lm_head %x, %w : (tensor<?x64xf32>, tensor<100x64xbf16>) -> tensor<?x100xf32>
  return
}

// -----

func.func @lm_head_width(%x: tensor<?x32xf32>) {
  %w = ninfer.weight "w" : tensor<100x64xbf16>
  // expected-error @+1 {{input width 32 != weight dim 1 64}}
  %l = ninfer.lm_head %x, %w : (tensor<?x32xf32>, tensor<100x64xbf16>) -> tensor<1x100xf32>
  return
}

// -----

func.func @sample_result(%l: tensor<1x100xf32>) {
  // expected-error @+1 {{result must be tensor<1xi32>}}
  %t = ninfer.sample %l : (tensor<1x100xf32>) -> tensor<2xi32>
  return
}
