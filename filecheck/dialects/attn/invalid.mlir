// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @gqa(%q: !irfuse.tensor<[1, 30, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>) {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64} : (!irfuse.tensor<[1, 30, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 30, s0, 128], bf16>
  func.return
}
// CHECK: q's 30 heads are not a multiple of k/v's 8 heads (grouped-query attention)

// -----

func.func @head_dim(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 64], bf16>) {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 64], bf16>, !irfuse.tensor<[1, 8, s0, 64], bf16>) -> !irfuse.tensor<[1, 32, s0, 64], bf16>
  func.return
}
// CHECK: k's head dim is 64, expected 128

// -----

func.func @kv_length(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %v: !irfuse.tensor<[1, 8, s1, 128], bf16>) {
  %o = attn.attention %q, %k, %v {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s1, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: v's length is s1, expected s0

// -----

func.func @batch(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[2, 8, s0, 128], bf16>) {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[2, 8, s0, 128], bf16>, !irfuse.tensor<[2, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: k has batch dims [2], expected q's [1]

// -----

func.func @kv_dtype(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], f32>) {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], f32>, !irfuse.tensor<[1, 8, s0, 128], f32>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: k has dtype f32, expected q's bf16

// -----

func.func @rank(%q: !irfuse.tensor<[s0, 128], bf16>) {
  %o = attn.attention %q, %q, %q {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return
}
// CHECK: q must have rank >= 3, got [s0, 128]

// -----

func.func @mask_and_causal(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %m: !irfuse.tensor<[s0, s0], i1>) {
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[s0, s0], i1>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: a causal attention takes no mask

// -----

func.func @mask_broadcast(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %m: !irfuse.tensor<[1, 8, s0, s0], f32>) {
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, s0], f32>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: mask of shape [1, 8, s0, s0] does not broadcast to [1, 32, s0, s0]

// -----

func.func @out_shape(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>) {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 8, s0, 128], bf16>
  func.return
}
// CHECK: out has shape [1, 8, s0, 128], expected [1, 32, s0, 128]

// -----

func.func @scale(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>) {
  %o = attn.attention %q, %k, %k {scale = 0.0 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  func.return
}
// CHECK: scale must be a finite value > 0, got 0.0

// -----

func.func @mla_q(%q: !irfuse.tensor<[s0, 16, 128], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 128], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: q ([T, num_heads, qk_nope_head_dim + qk_rope_head_dim]) has shape [s0, 16, 128], expected [s0, 16, 192]

// -----

func.func @mla_weight(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[2048, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[2048, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: kv_b_weight ([num_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]) has shape [2048, 512], expected [4096, 512]

// -----

func.func @mla_k_pe(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 16, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 16, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: k_pe ([T, 1, qk_rope_head_dim]) has shape [s0, 16, 64], expected [s0, 1, 64]

// -----

func.func @mla_latent(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s1, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s1, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: kv_c ([T, kv_lora_rank]) has shape [s1, 512], expected [s0, 512]

// -----

func.func @mla_heads(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 0 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: num_heads must be >= 1, got 0

// -----

func.func @mla_out(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 192], bf16>
  func.return
}
// CHECK: out has shape [s0, 16, 192], expected [s0, 16, 128]

// -----

func.func @mla_token_major_mask(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %m: !irfuse.tensor<[s0, s0], i1>) {
  %o = attn.mla_attention %q, %c, %p, %w, mask %m {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[s0, s0], i1>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  func.return
}
// CHECK: token-major MLA takes no mask (vLLM's interface)

// -----

func.func @mla_batch_major_latent(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, s0, 512], bf16>, %p: !irfuse.tensor<[2, 1, s0, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, s0, 512], bf16>, !irfuse.tensor<[2, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}
// CHECK: kv_c has rank 3, expected q's rank 4

// -----

func.func @mla_batch_major_heads(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, 2, s0, 512], bf16>, %p: !irfuse.tensor<[2, 1, s0, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 2, s0, 512], bf16>, !irfuse.tensor<[2, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}
// CHECK: kv_c ([..., 1, L, kv_lora_rank]) has shape [2, 2, s0, 512], expected [2, 1, s0, 512]

// -----

func.func @mla_batch_major_batch(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, 1, s0, 512], bf16>, %p: !irfuse.tensor<[3, 1, s0, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s0, 512], bf16>, !irfuse.tensor<[3, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}
// CHECK: k_pe ([..., 1, L, qk_rope_head_dim]) has shape [3, 1, s0, 64], expected [2, 1, s0, 64]

// -----

func.func @mla_batch_major_out(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, 1, s1, 512], bf16>, %p: !irfuse.tensor<[2, 1, s1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s1, 512], bf16>, !irfuse.tensor<[2, 1, s1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[2, 16, s1, 128], bf16>
  func.return
}
// CHECK: out has shape [2, 16, s1, 128], expected [2, 16, s0, 128]

// -----

func.func @mla_batch_major_mask_shape(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, 1, s0, 512], bf16>, %p: !irfuse.tensor<[2, 1, s0, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %m: !irfuse.tensor<[2, 3, s0, s0], i1>) {
  %o = attn.mla_attention %q, %c, %p, %w, mask %m {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s0, 512], bf16>, !irfuse.tensor<[2, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[2, 3, s0, s0], i1>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}
// CHECK: mask of shape [2, 3, s0, s0] does not broadcast to [2, 16, s0, s0]

// -----

func.func @mla_batch_major_mask_causal(%q: !irfuse.tensor<[2, 16, s0, 192], bf16>, %c: !irfuse.tensor<[2, 1, s0, 512], bf16>, %p: !irfuse.tensor<[2, 1, s0, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %m: !irfuse.tensor<[2, 1, s0, s0], i1>) {
  %o = attn.mla_attention %q, %c, %p, %w, mask %m {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, causal = true, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s0, 512], bf16>, !irfuse.tensor<[2, 1, s0, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[2, 1, s0, s0], i1>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}
// CHECK: a causal attention takes no mask

// -----

func.func @rope_both(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>, %cs: !irfuse.tensor<[s0, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c, cos %cs, sin %cs {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rope takes either positions and cos_sin_cache or cos and sin, not both

// -----

func.func @rope_neither(%q: !irfuse.tensor<[s0, 32, 128], bf16>) {
  %o = attn.rope %q {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rope needs positions and cos_sin_cache, or cos and sin

// -----

func.func @rope_half(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>) {
  %o = attn.rope %q, positions %p {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rope needs both positions and cos_sin_cache

// -----

func.func @rope_odd(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 63 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rotary_dim must be even, >= 2 and <= head_dim 128, got 63

// -----

func.func @rope_too_wide(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 256 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rotary_dim must be even, >= 2 and <= head_dim 128, got 256

// -----

// vLLM's flat [T, H * D] query must be viewed as [T, H, D] first.
func.func @rope_head_dim(%q: !irfuse.tensor<[s0, 4096], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  func.return
}
// CHECK: q's last dim (head_dim) is 4096, expected 128

// -----

func.func @rope_k_out(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, k %k, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: rope with a k operand returns k_out

// -----

func.func @rope_q_out(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], f32>
  func.return
}
// CHECK: q_out has dtype f32, expected q's bf16

// -----

func.func @rope_positions(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], f32>, %c: !irfuse.tensor<[4096, 128], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], f32>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: positions must have an integer dtype, got f32

// -----

func.func @rope_cache(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 64], bf16>) {
  %o = attn.rope %q, positions %p, cos_sin_cache %c {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: cos_sin_cache's last dim (rotary_dim) is 64, expected 128

// -----

func.func @rope_sin(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %cs: !irfuse.tensor<[s0, 128], bf16>, %sn: !irfuse.tensor<[s0, 128], f32>) {
  %o = attn.rope %q, cos %cs, sin %sn {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], f32>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: sin has dtype f32, expected cos's bf16

// -----

func.func @kv_heads(%k: !irfuse.tensor<[s0, 4, 128], bf16>, %v: !irfuse.tensor<[s0, 4, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %s: !irfuse.tensor<[s0], i64>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[s0, 4, 128], bf16>, !irfuse.tensor<[s0, 4, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}
// CHECK: k_cache has shape [1024, 16, 8, 128], expected [?, ?, 4, 128]

// -----

func.func @kv_blocks(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[512, 16, 8, 128], bf16>, %s: !irfuse.tensor<[s0], i64>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[512, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[512, 16, 8, 128], bf16>)
  func.return
}
// CHECK: v_cache has shape [512, 16, 8, 128], expected [1024, 16, 8, 128]

// -----

func.func @kv_dtype(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], f8E4M3FN>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %s: !irfuse.tensor<[s0], i64>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], f8E4M3FN>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], f8E4M3FN>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}
// CHECK: k has dtype bf16 but its cache holds f8E4M3FN

// -----

func.func @kv_slots(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %s: !irfuse.tensor<[s0], f32>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], f32>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}
// CHECK: slot_mapping must have an integer dtype, got f32

// -----

func.func @kv_slots_len(%k: !irfuse.tensor<[4, 8, 128], bf16>, %v: !irfuse.tensor<[4, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %s: !irfuse.tensor<[5], i64>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[4, 8, 128], bf16>, !irfuse.tensor<[4, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[5], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}
// CHECK: slot_mapping has shape [5], expected [4]

// -----

func.func @kv_result(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %s: !irfuse.tensor<[s0], i64>) {
  %a, %b = attn.kv_cache_write %k, %v, %kc, %vc, %s : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 64], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}
// CHECK: k_cache_out has shape [1024, 16, 8, 64], expected [1024, 16, 8, 128]

// -----

func.func @vllm_attention_heads(%q: !irfuse.tensor<[s0, 30, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>) {
  %o = attn.vllm_attention %q, %k, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 30, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>) -> !irfuse.tensor<[s0, 30, 128], bf16>
  func.return
}
// CHECK: q's 30 heads are not a multiple of k/v's 8 heads (grouped-query attention)

// -----

func.func @vllm_attention_out(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 64], bf16>) {
  %o = attn.vllm_attention %q, %k, %v {layer_name = "l0"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: out has shape [s0, 32, 128], expected [s0, 32, 64]

// -----

func.func @vllm_attention_name(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>) {
  %o = attn.vllm_attention %q, %k, %k {layer_name = ""} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: layer_name must not be empty

// -----

func.func @vllm_attention_layer(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %ln: !irfuse.tensor<[1], f32>) {
  %o = attn.vllm_attention %q, %k, %k, layer %ln {layer_name = "l0"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: layer must be an opaque value (vLLM's LayerName)

// -----

func.func @vllm_mla_tokens(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %kvc: !irfuse.tensor<[s1, 512], bf16>, %kpe: !irfuse.tensor<[s0, 1, 64], bf16>) {
  %o = attn.vllm_mla_attention %q, %kvc, %kpe {layer_name = "l0"} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s1, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>) -> !irfuse.tensor<[s0, 2048], bf16>
  func.return
}
// CHECK: kv_c_normed's token count is s1, expected s0

// -----

func.func @vllm_kv_update_dep(%k: !irfuse.tensor<[s0, 8, 128], bf16>) {
  %d = attn.vllm_kv_cache_update %k, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>) -> !irfuse.tensor<[0], f32>
  func.return
}
// CHECK: kv_cache_dep has dtype f32, expected k's bf16

// -----

func.func @vllm_kv_update_heads(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 4, 128], bf16>) {
  %d = attn.vllm_kv_cache_update %k, %v {layer_name = "l0"} : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 4, 128], bf16>) -> !irfuse.tensor<[0], bf16>
  func.return
}
// CHECK: v's head count is 4, expected 8

// -----

func.func @mla_cache_width(%kv_c: !irfuse.tensor<[8, 512], bf16>, %k_pe: !irfuse.tensor<[8, 64], bf16>, %cache: !irfuse.tensor<[64, 16, 512], bf16>, %slots: !irfuse.tensor<[8], i64>) {
  %c2 = attn.mla_kv_cache_write %kv_c, %k_pe, %cache, %slots : (!irfuse.tensor<[8, 512], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64, 16, 512], bf16>, !irfuse.tensor<[8], i64>) -> !irfuse.tensor<[64, 16, 512], bf16>
  func.return
}
// CHECK: kv_cache's last dim (kv_lora_rank + rope_dim) is 512, expected 576

// -----

func.func @mrope_sections(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>) {
  %qo = attn.rope %q, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 20>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[3, s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: mrope_section [16, 24, 20] must be three sizes >= 0 that add up to rotary_dim / 2 (64)

// -----

func.func @mrope_rows(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>) {
  %qo = attn.rope %q, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 24>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: positions must have rank >= 2, got [s0]

// -----

func.func @mrope_table_rows(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %cos: !irfuse.tensor<[2, s0, 64], bf16>) {
  %qo = attn.rope %q, cos %cos, sin %cos {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 24>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: cos's first dim (the temporal, height and width rows) is 2, expected 3

// -----

func.func @mrope_full_table(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %cos: !irfuse.tensor<[3, s0, 128], bf16>) {
  %qo = attn.rope %q, cos %cos, sin %cos {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 24>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[3, s0, 128], bf16>, !irfuse.tensor<[3, s0, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: cos has shape [3, s0, 128]: its last dim must be rotary_dim / 2 (64)

// -----

func.func @interleaved_alone(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>) {
  %qo = attn.rope %q, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_interleaved} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}
// CHECK: mrope_interleaved needs mrope_section
