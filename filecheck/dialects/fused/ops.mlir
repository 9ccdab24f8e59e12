// RUN: irfuse-opt %s | irfuse-opt | filecheck %s
// RUN: irfuse-opt %s --print-op-generic | irfuse-opt | filecheck %s

// Every fused op, in each scheme it takes, survives print -> parse -> print.

// CHECK-LABEL: func.func @rms_norm_quant
func.func @rms_norm_quant(%x: !irfuse.tensor<[s0, 4096], bf16>, %res: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>, %s2: !irfuse.tensor<[1], f32>) {
  // Residual add + norm + static quant (fused_add_rms_norm_static_fp8_quant).
  // CHECK: %{{.*}}, %{{.*}} = fused.rms_norm_quant %[[X:[^,]+]], residual %[[RES:[^,]+]], weight %[[W:[^,]+]], scales [%[[S:[a-z0-9_]+]]] {eps = 1.000000e-05 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], residual_out !irfuse.tensor<[s0, 4096], bf16>)
  %q, %r = fused.rms_norm_quant %x, residual %res, weight %w, scales [%s] {eps = 1.0e-05 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], residual_out !irfuse.tensor<[s0, 4096], bf16>)
  // One norm, two static quants of it.
  // CHECK-NEXT: fused.rms_norm_quant %[[X]], weight %[[W]], scales [%[[S]], %{{[a-z0-9_]+}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>, !irfuse.tensor<[1], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], f8E4M3FN>])
  %q1, %q2 = fused.rms_norm_quant %x, weight %w, scales [%s, %s2] {eps = 1.0e-06 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>, !irfuse.tensor<[1], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], f8E4M3FN>])
  // Dynamic per-token with an upper bound and a residual.
  // CHECK-NEXT: fused.rms_norm_quant %[[X]], residual %[[RES]], weight %[[W]], scale_ub %[[S]] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 1], f32>, residual_out !irfuse.tensor<[s0, 4096], bf16>)
  %q3, %s3, %r3 = fused.rms_norm_quant %x, residual %res, weight %w, scale_ub %s {eps = 1.0e-06 : f64, scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 1], f32>, residual_out !irfuse.tensor<[s0, 4096], bf16>)
  // Per-group, column-major scales, Gemma's weight offset.
  // CHECK-NEXT: fused.rms_norm_quant %[[X]], weight %[[W]] {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, scheme = #quant.scheme<group 128, col_major>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 32], f32>)
  %q4, %s4 = fused.rms_norm_quant %x, weight %w {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64, scheme = #quant.scheme<group 128, col_major>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (qs [!irfuse.tensor<[s0, 4096], f8E4M3FN>], scale_out !irfuse.tensor<[s0, 32], f32>)
  func.return
}

// CHECK-LABEL: func.func @silu_mul_quant
func.func @silu_mul_quant(%x: !irfuse.tensor<[s0, 28672], bf16>, %s: !irfuse.tensor<[], f32>, %m: !irfuse.tensor<[200, 256], bf16>) {
  // CHECK: fused.silu_mul_quant %{{.*}}, scale %{{[^ ]+}} {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 28672], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 14336], f8E4M3FN>
  %q = fused.silu_mul_quant %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 28672], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 14336], f8E4M3FN>
  // CHECK-NEXT: fused.silu_mul_quant %{{[^ ]+}} {scheme = #quant.scheme<group 128, ue8m0>} : (!irfuse.tensor<[s0, 28672], bf16>) -> (!irfuse.tensor<[s0, 14336], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 112], f32>)
  %q2, %s2 = fused.silu_mul_quant %x {scheme = #quant.scheme<group 128, ue8m0>} : (!irfuse.tensor<[s0, 28672], bf16>) -> (!irfuse.tensor<[s0, 14336], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 112], f32>)
  // 200 rows pad to 256 scale rows; d = 128 gives 8 scale columns.
  // CHECK-NEXT: fused.silu_mul_quant_nvfp4 %{{.*}}, %{{[^ ]+}} : (!irfuse.tensor<[200, 256], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[200, 64], ui8>, !irfuse.tensor<[256, 8], f8E4M3FN>)
  %q3, %b3 = fused.silu_mul_quant_nvfp4 %m, %s : (!irfuse.tensor<[200, 256], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[200, 64], ui8>, !irfuse.tensor<[256, 8], f8E4M3FN>)
  func.return
}

// CHECK-LABEL: func.func @all_reduce_rms_norm
func.func @all_reduce_rms_norm(%x: !irfuse.tensor<[s0, 4096], bf16>, %res: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  // CHECK: fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %o, %r = fused.all_reduce_rms_norm %x, residual %res, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  // No residual: residual_out is the all-reduced x.
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 4 : i64, eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %o2, %r2 = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 4 : i64, eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{.*}}, scale %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  %q, %r3 = fused.all_reduce_rms_norm %x, residual %res, %w, scale %s {group = "tp", world_size = 2 : i64, eps = 1.0e-05 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{.*}}, scale %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<[s1, 256], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  %q4, %b4, %r4 = fused.all_reduce_rms_norm %x, residual %res, %w, scale %s {group = "tp", world_size = 2 : i64, eps = 1.0e-05 : f64, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<[s1, 256], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  // Per-token FP8 with a scale bound, per-group FP8, and the norm's readings.
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{.*}}, scale_ub %{{[^ ]+}} {group = "tp:0", world_size = 4 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<dynamic_token>, round_sum} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  %q5, %s5, %r5 = fused.all_reduce_rms_norm %x, residual %res, %w, scale_ub %s {group = "tp:0", world_size = 4 : i64, eps = 1.0e-05 : f64, scheme = #quant.scheme<dynamic_token>, round_sum} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  %q6, %s6, %r6 = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, weight_offset = 1.0 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 4096], bf16>)
  // CHECK-NEXT: fused.all_reduce_rms_norm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-06 : f64, weight_f32} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %o7, %r7 = fused.all_reduce_rms_norm %x, %w {group = "tp", world_size = 2 : i64, eps = 1.0e-06 : f64, weight_f32} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}

// CHECK-LABEL: func.func @rope_fusions
func.func @rope_fusions(%qw: !irfuse.tensor<[128], bf16>, %kw: !irfuse.tensor<[128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[40960, 128], bf16>, %q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[64, 16, 8, 128], bf16>, %slots: !irfuse.tensor<[s0], i64>, %cs: !irfuse.tensor<[s0, 1, 32], f32>) {
  // CHECK: %{{.*}}, %{{.*}} = fused.qk_norm_rope %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {eps = 1.000000e-06 : f64, is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  %q1, %k1 = fused.qk_norm_rope %q, %k, %qw, %kw, positions %pos, cos_sin_cache %cache {eps = 1.0e-06 : f64, is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  // CHECK-NEXT: fused.qk_norm_rope %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, cos %{{.*}}, sin %{{[^ ]+}} {eps = 1.000000e-05 : f64, weight_offset = 1.000000e+00 : f64, is_neox = false, rotary_dim = 64 : i64, head_dim = 128 : i64, weight_f32, rope_f32} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0, 1, 32], f32>, !irfuse.tensor<[s0, 1, 32], f32>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  %q2, %k2 = fused.qk_norm_rope %q, %k, %qw, %kw, cos %cs, sin %cs {eps = 1.0e-05 : f64, weight_offset = 1.0 : f64, is_neox = false, rotary_dim = 64 : i64, head_dim = 128 : i64, weight_f32, rope_f32} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[128], bf16>, !irfuse.tensor<[s0, 1, 32], f32>, !irfuse.tensor<[s0, 1, 32], f32>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>)
  // CHECK-NEXT: fused.rope_kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {is_neox = false, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>)
  %qo, %kc2, %vc2 = fused.rope_kv_cache_write %q, %k, %k, positions %pos, cos_sin_cache %cache, %kc, %kc, %slots {is_neox = false, rotary_dim = 128 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[40960, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>, !irfuse.tensor<[64, 16, 8, 128], bf16>)
  func.return
}

// CHECK-LABEL: func.func @attention_quant
func.func @attention_quant(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %s: !irfuse.tensor<[], f32>, %q2: !irfuse.tensor<[2, 4, 8, 64], bf16>, %k2: !irfuse.tensor<[2, 4, 8, 64], bf16>) {
  // The output is token-major and flattened, as the quant saw it: [s0, 32 * 128].
  // CHECK: fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {scale = 6.250000e-02 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  %o = fused.attention_quant %q, %k, %k, output_scale %s {scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  // Batch 2, length 8: 16 token rows, kept as [2, 8, 256] here.
  // CHECK-NEXT: fused.attention_quant %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 1.250000e-01 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>) -> (!irfuse.tensor<[2, 8, 256], f8E4M3FN>, scale_out !irfuse.tensor<[2, 8, 2], f32>)
  %o2, %s2 = fused.attention_quant %q2, %k2, %k2 {scale = 0.125 : f64, scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>) -> (!irfuse.tensor<[2, 8, 256], f8E4M3FN>, scale_out !irfuse.tensor<[2, 8, 2], f32>)
  // CHECK-NEXT: fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {scale = 6.250000e-02 : f64, causal = true, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  %o3, %s3 = fused.attention_quant %q, %k, %k, output_scale %s {scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  func.return
}

// CHECK-LABEL: func.func @paged_decode_quant
func.func @paged_decode_quant(%q: !irfuse.tensor<[s0, 32, 1, 128], bf16>, %kc: !irfuse.tensor<[2081, 16, 8, 128], bf16>, %bt: !irfuse.tensor<[s0, 130], i32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[1], f32>) {
  // One query per sequence over its pages, read through the block table: [s0, 32 * 128] out.
  // CHECK-NEXT: fused.paged_decode_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 1.250000e-01 : f64, scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 130], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  %o = fused.paged_decode_quant %q, %kc, %kc, %bt, %sl, %s {scale = 0.125 : f64, scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 130], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  // CHECK-NEXT: fused.paged_decode_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 1.250000e-01 : f64, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 130], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  %o2, %s2 = fused.paged_decode_quant %q, %kc, %kc, %bt, %sl, %s {scale = 0.125 : f64, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 32, 1, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[2081, 16, 8, 128], bf16>, !irfuse.tensor<[s0, 130], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, scale_out !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  func.return
}

// CHECK-LABEL: func.func @mla_attention_quant
func.func @mla_attention_quant(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %kv_c: !irfuse.tensor<[s0, 512], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %s: !irfuse.tensor<[], f32>) {
  // CHECK: fused.mla_attention_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 6.250000e-02 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2048], f8E4M3FN>
  %o = fused.mla_attention_quant %q, %kv_c, %k_pe, %w, output_scale %s {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2048], f8E4M3FN>
  // CHECK-NEXT: fused.mla_attention_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {{{.*}}scheme = #quant.scheme<group 64, col_major, tma_aligned>} : ({{.*}}) -> (!irfuse.tensor<[s0, 2048], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  %o2, %s2 = fused.mla_attention_quant %q, %kv_c, %k_pe, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, causal = true, scheme = #quant.scheme<group 64, col_major, tma_aligned>} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> (!irfuse.tensor<[s0, 2048], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  func.return
}

// CHECK-LABEL: func.func @gemm_comms
func.func @gemm_comms(%a: !irfuse.tensor<[256, 4096], bf16>, %b: !irfuse.tensor<[4096, 4096], bf16>, %a8: !irfuse.tensor<[256, 4096], f8E4M3FN>, %b8: !irfuse.tensor<[4096, 1024], f8E4M3FN>, %s: !irfuse.tensor<[], f32>, %sh: !irfuse.tensor<[64, 4096], bf16>, %sh8: !irfuse.tensor<[64, 4096], f8E4M3FN>, %sat: !irfuse.tensor<[64, 1], f32>) {
  // CHECK: fused.gemm_reduce_scatter %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  %c = fused.gemm_reduce_scatter %a, %b {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  // CHECK-NEXT: fused.gemm_reduce_scatter %{{.*}}, %{{.*}}, scale_a %{{.*}}, scale_b %{{[^ ]+}} {group = "tp", world_size = 4 : i64, dim = 1 : i64, out_dtype = bf16} : (!irfuse.tensor<[256, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[256, 256], bf16>
  %c2 = fused.gemm_reduce_scatter %a8, %b8, scale_a %s, scale_b %s {group = "tp", world_size = 4 : i64, dim = 1 : i64, out_dtype = bf16} : (!irfuse.tensor<[256, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[256, 256], bf16>
  // CHECK-NEXT: fused.all_gather_gemm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  %c3 = fused.all_gather_gemm %sh, %b {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 4096], bf16>, !irfuse.tensor<[4096, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  // Row-wise scales belong to this rank's shard of a.
  // CHECK-NEXT: fused.all_gather_gemm %{{.*}}, %{{.*}}, scale_a %{{.*}}, scale_b %{{[^ ]+}} {group = "tp", world_size = 4 : i64, out_dtype = f32} : (!irfuse.tensor<[64, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[64, 1], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[256, 1024], f32>
  %c4 = fused.all_gather_gemm %sh8, %b8, scale_a %sat, scale_b %s {group = "tp", world_size = 4 : i64, out_dtype = f32} : (!irfuse.tensor<[64, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[64, 1], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[256, 1024], f32>
  func.return
}

// CHECK-LABEL: func.func @rms_norm_pad
func.func @rms_norm_pad(%x: !irfuse.tensor<[s0, 2880], bf16>, %res: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>, %w32: !irfuse.tensor<[2880], f32>) {
  // CHECK: fused.rms_norm_pad %{{.*}}, residual %{{.*}}, %{{[^ ]+}} {eps = 1.000000e-05 : f64, low = 0 : i64, high = 192 : i64, round_sum} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 3072], bf16>, residual_out !irfuse.tensor<[s0, 2880], bf16>)
  %p, %r = fused.rms_norm_pad %x, residual %res, %w {eps = 1.0e-05 : f64, low = 0 : i64, high = 192 : i64, round_sum} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 3072], bf16>, residual_out !irfuse.tensor<[s0, 2880], bf16>)
  // CHECK: fused.rms_norm_pad %{{.*}}, %{{[^ ]+}} {eps = 1.000000e-06 : f64, low = 64 : i64, high = 128 : i64, value = -1.000000e+00 : f64, weight_f32} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], f32>) -> !irfuse.tensor<[s0, 3072], f32>
  %q = fused.rms_norm_pad %x, %w32 {eps = 1.0e-06 : f64, low = 64 : i64, high = 128 : i64, value = -1.0 : f64, weight_f32} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], f32>) -> !irfuse.tensor<[s0, 3072], f32>
  func.return
}

// CHECK-LABEL: func.func @mla_dual_rms_norm
func.func @mla_dual_rms_norm(%q: !irfuse.tensor<[s0, 1536], bf16>, %qw: !irfuse.tensor<[1536], bf16>, %kv: !irfuse.tensor<[s0, 512], bf16>, %kvw: !irfuse.tensor<[512], bf16>) {
  // CHECK: fused.mla_dual_rms_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {q_eps = 1.000000e-06 : f64, kv_eps = 1.000000e-05 : f64, weight_offset = 1.000000e+00 : f64, weight_f32} : (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[1536], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[512], bf16>) -> (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[s0, 512], bf16>)
  %qn, %kvn = fused.mla_dual_rms_norm %q, %qw, %kv, %kvw {q_eps = 1.0e-06 : f64, kv_eps = 1.0e-05 : f64, weight_offset = 1.0 : f64, weight_f32} : (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[1536], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[512], bf16>) -> (!irfuse.tensor<[s0, 1536], bf16>, !irfuse.tensor<[s0, 512], bf16>)
  func.return
}

// CHECK-LABEL: func.func @rope_mla_kv_cache_write
func.func @rope_mla_kv_cache_write(%q: !irfuse.tensor<[s0, 16, 64], bf16>, %k: !irfuse.tensor<[s0, 1, 64], bf16>, %kv_c: !irfuse.tensor<[s0, 512], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cs: !irfuse.tensor<[4096, 64], bf16>, %cache: !irfuse.tensor<[1024, 16, 576], bf16>, %slots: !irfuse.tensor<[s0], i64>) {
  // CHECK: fused.rope_mla_kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{.*}}, %{{.*}}, %{{[^ ]+}} {is_neox = false, rotary_dim = 64 : i64, head_dim = 64 : i64, rope_f32}
  %qr, %kr, %c2 = fused.rope_mla_kv_cache_write %q, %k, %kv_c, positions %pos, cos_sin_cache %cs, %cache, %slots {is_neox = false, rotary_dim = 64 : i64, head_dim = 64 : i64, rope_f32} : (!irfuse.tensor<[s0, 16, 64], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>, !irfuse.tensor<[1024, 16, 576], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 16, 64], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[1024, 16, 576], bf16>)
  func.return
}
