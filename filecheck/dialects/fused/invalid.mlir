// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @rnq_no_scales(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  %q = fused.rms_norm_quant %x, weight %w {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>])
  func.return
}
// CHECK: a static scheme needs at least one scale

// -----

func.func @rnq_count(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q1, %q2 = fused.rms_norm_quant %x, weight %w, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], f8E4M3FN>])
  func.return
}
// CHECK: 1 scales but 2 quantized results (qs)

// -----

func.func @rnq_dynamic_scales(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %so = fused.rms_norm_quant %x, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return
}
// CHECK: a dynamic_token scheme computes its scale: no scales operands

// -----

// vLLM has no fused norm + dynamic per-tensor quant.
func.func @rnq_kind(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = fused.rms_norm_quant %x {eps = 1.0e-06 : f64, scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[1], f32>)
  func.return
}
// CHECK: fused.rms_norm_quant fuses static_tensor, dynamic_token or group quantization, not dynamic_tensor

// -----

func.func @rnq_residual_out(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %r = fused.rms_norm_quant %x, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], residual_out !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: residual_out exists exactly when residual does

// -----

func.func @rnq_scale_ub(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = fused.rms_norm_quant %x, scales [%s], scale_ub %s {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>])
  func.return
}
// CHECK: scale_ub applies to the dynamic_token scheme only

// -----

func.func @rnq_q_dtype(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = fused.rms_norm_quant %x, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], bf16>])
  func.return
}
// CHECK: qs[0] must have dtype f8E4M3FN or f8E4M3FNUZ, got bf16

// -----

func.func @rnq_group(%x: !irfuse.tensor<[s0, 4000], bf16>) {
  %q, %so = fused.rms_norm_quant %x {eps = 1.0e-06 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4000], bf16>) -> (qs [!irfuse.tensor<[s0, 4000], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 31], f32>)
  func.return
}
// CHECK: group size 128 does not divide the hidden size 4000

// -----

func.func @rnq_weight(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[1024], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = fused.rms_norm_quant %x, weight %w, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1024], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>])
  func.return
}
// CHECK: weight has shape [1024] but x's last dim is 4096

// -----

func.func @smq_kind(%x: !irfuse.tensor<[s0, 8192], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %b = fused.silu_mul_quant %x, scale %s {scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 8192], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<[s1, 256], f8E4M3FN>)
  func.return
}
// CHECK: fused.silu_mul_quant fuses static_tensor or group quantization, not nvfp4

// -----

func.func @smq_shape(%x: !irfuse.tensor<[s0, 8192], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = fused.silu_mul_quant %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 8192], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 8192], f8E4M3FN>
  func.return
}
// CHECK: q has shape [s0, 8192], expected [s0, 4096]

// -----

func.func @smq_scale(%x: !irfuse.tensor<[s0, 8192], bf16>) {
  %q = fused.silu_mul_quant %x {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 8192], bf16>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: a static_tensor scheme needs the scale operand

// -----

func.func @smq_nvfp4_block(%x: !irfuse.tensor<[128, 40], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %b = fused.silu_mul_quant_nvfp4 %x, %s : (!irfuse.tensor<[128, 40], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[128, 10], ui8>, !irfuse.tensor<[128, 4], f8E4M3FN>)
  func.return
}
// CHECK: silu_mul(x) has shape [128, 20]: NVFP4 needs [M, N] with a static N divisible by 16

// -----

func.func @arn_scale_no_scheme(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %o, %r = fused.all_reduce_rms_norm %x, %w, scale %s {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: scale, scale_ub and scale_out need a quant scheme

// -----

func.func @arn_world_size(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  %o, %r = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 0 : i64, eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: world_size must be >= 1, got 0

// -----

func.func @arn_kind(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  %o, %so, %r = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: fused.all_reduce_rms_norm fuses static_tensor, dynamic_token, group or nvfp4 quantization, not dynamic_tensor

// -----

func.func @arn_round_sum(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  %o, %r = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: round_sum applies to a norm with a residual only

// -----

func.func @arn_scale_ub(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %u: !irfuse.tensor<[], f32>) {
  %o, %so, %r = fused.all_reduce_rms_norm %x, %w, scale_ub %u {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: scale_ub applies to the dynamic_token scheme only

// -----

func.func @arn_residual_out(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  %o, %r = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], f32>)
  func.return
}
// CHECK: residual_out has dtype f32, expected x's bf16

// -----

func.func @arn_nvfp4(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %o, %so, %r = fused.all_reduce_rms_norm %x, %w, scale %s {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], ui8>, scale_out !irfuse.tensor<[s1, 256], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
// CHECK: out has shape [s0, 4096], expected [s0, 2048]

// -----
func.func @qk_weight(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %w: !irfuse.tensor<[64], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 128], bf16>) {
  %qo, %ko = fused.qk_norm_rope %q, %k, %w, %w, positions %p, cos_sin_cache %c {eps = 1.0e-06 : f64, is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  func.return
}
// CHECK: weight has shape [64] but q's last dim is 128

// -----
func.func @qk_both_tables(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %w: !irfuse.tensor<[128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 128], bf16>, %cs: !irfuse.tensor<[s0, 1, 64], bf16>) {
  %qo, %ko = fused.qk_norm_rope %q, %k, %w, %w, positions %p, cos_sin_cache %c, cos %cs, sin %cs {eps = 1.0e-06 : f64, is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  func.return
}
// CHECK: rope takes either positions and cos_sin_cache or cos and sin, not both

// -----
func.func @qk_cache(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %w: !irfuse.tensor<[128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 64], bf16>) {
  %qo, %ko = fused.qk_norm_rope %q, %k, %w, %w, positions %p, cos_sin_cache %c {eps = 1.0e-06 : f64, is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 64], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  func.return
}
// CHECK: cos_sin_cache's last dim (rotary_dim) is 64, expected 128

// -----
func.func @qk_rotary(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %w: !irfuse.tensor<[128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 128], bf16>) {
  %qo, %ko = fused.qk_norm_rope %q, %k, %w, %w, positions %p, cos_sin_cache %c {eps = 1.0e-06 : f64, is_neox = true, rotary_dim = 256 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  func.return
}
// CHECK: rotary_dim must be even, >= 2 and <= head_dim 128, got 256

// -----

func.func @rkv_cache_heads(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 4, 128], bf16>) {
  %qo, %a, %b = fused.rope_kv_cache_write %q, %k, %k, positions %p, cos_sin_cache %c, %kc, %kc, %p {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>, !irfuse.tensor<[64, 16, 4, 128], bf16>, !irfuse.tensor<[64, 16, 4, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[64, 16, 4, 128], bf16>, !irfuse.tensor<[64, 16, 4, 128], bf16>)
  func.return
}
// CHECK: k_cache has shape [64, 16, 4, 128], expected [?, ?, 8, 128]

// -----

func.func @rkv_q_out(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[40960, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 8, 128], bf16>) {
  %qo, %a, %b = fused.rope_kv_cache_write %q, %k, %k, positions %p, cos_sin_cache %c, %kc, %kc, %p {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>)
  func.return
}
// CHECK: q_out has shape [s0, 8, 128], expected [s0, 32, 128]

// -----

func.func @aq_hidden(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %s: !irfuse.tensor<[], f32>) {
  %o = fused.attention_quant %q, %k, %k, output_scale %s {scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 1024], f8E4M3FN>
  func.return
}
// CHECK: out's last dim (heads * v_head_dim) is 1024, expected 4096

// -----

func.func @aq_tokens(%q: !irfuse.tensor<[2, 4, 8, 64], bf16>, %s: !irfuse.tensor<[], f32>) {
  %o = fused.attention_quant %q, %q, %q, output_scale %s {scale = 0.125 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[32, 256], f8E4M3FN>
  func.return
}
// CHECK: out has shape [32, 256]: its leading dims must hold the 16 query positions

// -----

func.func @aq_kind(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>) {
  %o, %so = fused.attention_quant %q, %k, %k {scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return
}
// CHECK: fused.attention_quant fuses static_tensor, group or nvfp4 quantization, not dynamic_token

// -----

func.func @aq_output_scale(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>) {
  %o = fused.attention_quant %q, %k, %k {scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: a static_tensor scheme needs the output_scale operand

// -----

func.func @pdq_two_queries(%q: !irfuse.tensor<[s0, 32, 2, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 8, 128], bf16>, %bt: !irfuse.tensor<[s0, 4], i32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[1], f32>) {
  %o = fused.paged_decode_quant %q, %kc, %kc, %bt, %sl, %s {scale = 0.0625 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 32, 2, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 4], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: q's query length (one token per sequence) is 2, expected 1

// -----

func.func @pdq_table_dtype(%q: !irfuse.tensor<[s0, 32, 1, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 8, 128], bf16>, %bt: !irfuse.tensor<[s0, 4], f32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[1], f32>) {
  %o = fused.paged_decode_quant %q, %kc, %kc, %bt, %sl, %s {scale = 0.0625 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 4], f32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: block_table must have an integer dtype, got f32

// -----

func.func @pdq_heads(%q: !irfuse.tensor<[s0, 32, 1, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 6, 128], bf16>, %bt: !irfuse.tensor<[s0, 4], i32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[1], f32>) {
  %o = fused.paged_decode_quant %q, %kc, %kc, %bt, %sl, %s {scale = 0.0625 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[64, 16, 6, 128], bf16>, !irfuse.tensor<[64, 16, 6, 128], bf16>, !irfuse.tensor<[s0, 4], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: q's 32 heads are not a multiple of the cache's 6 heads (grouped-query attention)

// -----

func.func @mlaq_out(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %c: !irfuse.tensor<[s0, 512], bf16>, %p: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %s: !irfuse.tensor<[], f32>) {
  %o = fused.mla_attention_quant %q, %c, %p, %w, output_scale %s {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 16, 128], f8E4M3FN>
  func.return
}
// CHECK: out must be [T, num_heads * v_head_dim], got [s0, 16, 128]

// -----

func.func @grs_scales(%a: !irfuse.tensor<[256, 4096], f8E4M3FN>, %b: !irfuse.tensor<[4096, 1024], f8E4M3FN>, %s: !irfuse.tensor<[], f32>) {
  %c = fused.gemm_reduce_scatter %a, %b, scale_a %s {group = "tp", world_size = 4 : i64, out_dtype = bf16} : (!irfuse.tensor<[256, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[64, 1024], bf16>
  func.return
}
// CHECK: scale_a and scale_b come together (a scaled GEMM) or not at all

// -----

func.func @grs_out_dtype(%a: !irfuse.tensor<[256, 4096], f8E4M3FN>, %b: !irfuse.tensor<[4096, 1024], f8E4M3FN>, %s: !irfuse.tensor<[], f32>) {
  %c = fused.gemm_reduce_scatter %a, %b, scale_a %s, scale_b %s {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[64, 1024], bf16>
  func.return
}
// CHECK: a scaled GEMM needs out_dtype

// -----

func.func @grs_divides(%a: !irfuse.tensor<[250, 4096], bf16>, %b: !irfuse.tensor<[4096, 4096], bf16>) {
  %c = fused.gemm_reduce_scatter %a, %b {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[250, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[62, 4096], bf16>
  func.return
}
// CHECK: dim 0 of size 250 is not divisible by world_size 4

// -----

func.func @grs_shape(%a: !irfuse.tensor<[256, 4096], bf16>, %b: !irfuse.tensor<[4096, 4096], bf16>) {
  %c = fused.gemm_reduce_scatter %a, %b {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  func.return
}
// CHECK: c has shape [256, 4096], expected [64, 4096]

// -----

func.func @agg_dim(%a: !irfuse.tensor<[64, 4096], bf16>, %b: !irfuse.tensor<[4096, 4096], bf16>) {
  %c = fused.all_gather_gemm %a, %b {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[64, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  func.return
}
// CHECK: all_gather_gemm gathers a along dim 0, got dim 1

// -----

func.func @agg_rows(%a: !irfuse.tensor<[64, 4096], bf16>, %b: !irfuse.tensor<[4096, 4096], bf16>) {
  %c = fused.all_gather_gemm %a, %b {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  func.return
}
// CHECK: c has shape [64, 4096], expected [256, 4096]

// -----

// Row-wise scales are the local shard's [M / world_size, 1] (gathered with a) or the gathered
// rows' [M, 1] (replicated); any other row count is neither.
func.func @agg_scale_rows(%a: !irfuse.tensor<[64, 4096], f8E4M3FN>, %b: !irfuse.tensor<[4096, 1024], f8E4M3FN>, %sa: !irfuse.tensor<[128, 1], f32>, %s: !irfuse.tensor<[], f32>) {
  %c = fused.all_gather_gemm %a, %b, scale_a %sa, scale_b %s {group = "tp", world_size = 4 : i64, out_dtype = bf16} : (!irfuse.tensor<[64, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[128, 1], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[256, 1024], bf16>
  func.return
}
// CHECK: scale_a of an all-gathered GEMM is per-tensor [1], the shard's row-wise [64, 1] or the gathered rows' [256, 1]; got [128, 1]

// -----

func.func @pad_out(%x: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) {
  %p, %r = fused.rms_norm_pad %x, residual %x, %w {eps = 1.0e-05 : f64, low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 2944], bf16>, residual_out !irfuse.tensor<[s0, 2880], bf16>)
  func.return
}
// CHECK: out has shape [s0, 2944], expected [s0, 3072]

// -----

func.func @pad_negative(%x: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) {
  %p = fused.rms_norm_pad %x, %w {eps = 1.0e-05 : f64, low = 0 : i64, high = -64 : i64} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> !irfuse.tensor<[s0, 2816], bf16>
  func.return
}
// CHECK: pad amounts must be >= 0, got low 0, high -64

// -----

func.func @pad_nan(%x: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) {
  %p = fused.rms_norm_pad %x, %w {eps = 1.0e-05 : f64, low = 0 : i64, high = 64 : i64, value = 0x7FF8000000000000 : f64} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16>
  func.return
}
// CHECK: a NaN pad value is not supported

// -----

func.func @pad_round_sum_no_residual(%x: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) {
  %p = fused.rms_norm_pad %x, %w {eps = 1.0e-05 : f64, low = 0 : i64, high = 64 : i64, round_sum} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16>
  func.return
}
// CHECK: round_sum applies to a norm with a residual only

// -----

func.func @rnq_round_sum_no_residual(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = fused.rms_norm_quant %x, weight %w, scales [%s] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 64], f8E4M3FN>])
  func.return
}
// CHECK: round_sum applies to a norm with a residual only

// -----

func.func @vllm_attention_quant_width(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %s: !irfuse.tensor<[1], f32>) {
  %o = fused.vllm_attention_quant %q, %k, %k, %s {layer_name = "l0", scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 2048], f8E4M3FN>
  func.return
}
// CHECK: out's last dim (heads * v_head_dim) is 2048, expected 4096

// -----

func.func @vllm_attention_quant_scheme(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %s: !irfuse.tensor<[1], f32>) {
  %o = fused.vllm_attention_quant %q, %k, %k, %s {layer_name = "l0", scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: fused.vllm_attention_quant fuses static_tensor or nvfp4 quantization, not dynamic_token

// -----

func.func @rope_vllm_kv_k_out(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>) {
  %qr, %kr, %d = fused.rope_vllm_kv_cache_update %q, %k, %k, positions %pos, cos_sin_cache %cache {layer_name = "l0", is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[0], bf16>)
  func.return
}
// CHECK: k_out has shape [s0, 32, 128], expected [s0, 8, 128]

// -----

func.func @rope_vllm_kv_eps(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>) {
  %qr, %kr, %d = fused.rope_vllm_kv_cache_update %q, %k, %k, positions %pos, cos_sin_cache %cache {layer_name = "l0", is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[0], bf16>)
  func.return
}
// CHECK: eps is given exactly when the norm weights are

// -----

func.func @dual_norm_tokens_differ(%q: !irfuse.tensor<[8, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kv: !irfuse.tensor<[4, 32], bf16>, %kvw: !irfuse.tensor<[32], bf16>) {
  %qn, %kvn = fused.mla_dual_rms_norm %q, %qw, %kv, %kvw {q_eps = 1.0e-06 : f64, kv_eps = 1.0e-06 : f64} : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[4, 32], bf16>, !irfuse.tensor<[32], bf16>) -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[4, 32], bf16>)
  func.return
}
// CHECK: kv's dim 0 is 4, expected 8

// -----

func.func @dual_norm_weight(%q: !irfuse.tensor<[8, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kv: !irfuse.tensor<[8, 32], bf16>, %kvw: !irfuse.tensor<[64], bf16>) {
  %qn, %kvn = fused.mla_dual_rms_norm %q, %qw, %kv, %kvw {q_eps = 1.0e-06 : f64, kv_eps = 1.0e-06 : f64} : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[8, 32], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 32], bf16>)
  func.return
}
// CHECK: weight has shape [64] but kv's last dim is 32

// -----

func.func @rope_mla_two_key_heads(%q: !irfuse.tensor<[8, 16, 64], bf16>, %k: !irfuse.tensor<[8, 2, 64], bf16>, %kv_c: !irfuse.tensor<[8, 512], bf16>, %pos: !irfuse.tensor<[8], i64>, %cs: !irfuse.tensor<[4096, 64], bf16>, %cache: !irfuse.tensor<[64, 16, 576], bf16>, %slots: !irfuse.tensor<[8], i64>) {
  %qr, %kr, %c2 = fused.rope_mla_kv_cache_write %q, %k, %kv_c, positions %pos, cos_sin_cache %cs, %cache, %slots {is_neox = false, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[8, 16, 64], bf16>, !irfuse.tensor<[8, 2, 64], bf16>, !irfuse.tensor<[8, 512], bf16>, !irfuse.tensor<[8], i64>, !irfuse.tensor<[4096, 64], bf16>, !irfuse.tensor<[64, 16, 576], bf16>, !irfuse.tensor<[8], i64>) -> (!irfuse.tensor<[8, 16, 64], bf16>, !irfuse.tensor<[8, 2, 64], bf16>, !irfuse.tensor<[64, 16, 576], bf16>)
  func.return
}
// CHECK: k_pe has shape [8, 2, 64]: [T, 1, rope_dim] or [T, rope_dim] (one key shared by all heads)
