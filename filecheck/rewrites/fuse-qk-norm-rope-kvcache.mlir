// RUN: irfuse-opt %s -p fuse-qk-norm-rope-kvcache | filecheck %s
// RUN: irfuse-opt %s -p fuse-qk-norm-rope-kvcache,select-kernels | filecheck %s --check-prefix=KERNEL

// Per-head norms of q and k, RoPE, the cache write of the rotated k and of v: one op (the norms'
// inputs, weights and eps; the rope's table and style; the write's caches and slots).
// CHECK-LABEL: func.func @norm_rope_write
// CHECK:       %[[Q:.+]], %[[KC:.+]], %[[VC:.+]] = fused.rope_kv_cache_write %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}}, q_weight %{{[^ ,]+}}, k_weight %{{[^ ,]+}}, positions %{{.*}}, cos_sin_cache %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64, eps = 1.000000e-06 : f64}
// CHECK-NOT:   norm.rms_norm
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.kv_cache_write
// CHECK:       func.return %[[Q]], %[[VC]]
// KERNEL-LABEL: func.func @norm_rope_write
// KERNEL:      %[[Q:.+]] = kernel.call impl "reference" "irfuse::rope_kv_cache_write.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, %{{.*}}, false, 32, eps = 1.0e-06)
// KERNEL-NOT:  norm.rms_norm
// KERNEL:      func.return %[[Q]]
func.func @norm_rope_write(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 32], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 32], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %vc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// vLLM's spelling: the norms run on [T, H, D] views of flat q and k, the rope on [T, H * D] views
// of the normed heads viewed back: the fused op takes the norms' inputs through the same views.
// CHECK-LABEL: func.func @viewed_heads
// CHECK:       %[[QV:.+]] = aten.call "aten::view.default"(%{{.*}}, [-1, 4, 64])
// CHECK:       fused.rope_kv_cache_write %[[QV]],
// CHECK-NOT:   norm.rms_norm
func.func @viewed_heads(%q: !irfuse.tensor<[s0, 256], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qh = aten.call "aten::view.default"(%q, [-1, 4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %qn = norm.rms_norm %qh, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %vc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// No candidate: RoPE and the cache write without QK norm (Llama) stay for fuse-rope-kvcache.
// CHECK-LABEL: func.func @no_norms
// CHECK:       attn.rope
// CHECK:       attn.kv_cache_write
// CHECK-NOT:   fused.
func.func @no_norms(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %vc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// The rotated k is also returned: the fused op returns it too (`k_out`, the `_k` kernel), and the
// norms, the rope and the write all go.
// CHECK-LABEL: func.func @k_read_elsewhere
// CHECK-NOT:   norm.rms_norm
// CHECK:       %[[Q:.+]], %{{.+}}, %{{.+}}, %[[K:.+]] = fused.rope_kv_cache_write %q, %k, %v, q_weight %w, k_weight %w,{{.*}} k_out
// CHECK-NOT:   attn.
// CHECK:       func.return %[[Q]], %[[K]],
func.func @k_read_elsewhere(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %kr, %kc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// Not fused: only q is normalized per head.
// CHECK-LABEL: func.func @only_q_normed
// CHECK:       norm.rms_norm
// CHECK:       attn.rope
// CHECK-NOT:   fused.
func.func @only_q_normed(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %qr, %kr = attn.rope %qn, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %vc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// An FP8 cache: the rotated k and v are static per-tensor FP8 quants (x / s): the scales join.
// CHECK-LABEL: func.func @norm_rope_write_fp8
// CHECK:       fused.rope_kv_cache_write {{.*}}, k_scale %{{[^ ,]+}}, v_scale %{{[^ ]+}} {{{.*}}eps = 1.000000e-06 : f64
// CHECK-NOT:   quant.fp8
// CHECK-NOT:   norm.rms_norm
func.func @norm_rope_write_fp8(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %vc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %slots: !irfuse.tensor<[s0], i64>, %ks: !irfuse.tensor<[], f32>, %vs: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4, 64], bf16> {
  %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %k8 = quant.fp8 %kr, scale %ks {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %v8 = quant.fp8 %v, scale %vs {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %kc2, %vc2 = attn.kv_cache_write %k8, %v8, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>)
  func.return %qr : !irfuse.tensor<[s0, 4, 64], bf16>
}
