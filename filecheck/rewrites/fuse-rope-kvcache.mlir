// RUN: irfuse-opt %s -p fuse-rope-kvcache | filecheck %s
// RUN: irfuse-opt %s -p enable-qk-norm-rope-fusion,fuse-rope-kvcache,select-kernels | filecheck %s --check-prefix=KERNEL

// RoPE of q and k, then the cache write of the rotated k and of v: one op returning the rotated
// q and the caches. The slot mapping's length is a symbol of its own (vLLM marks it dynamic
// apart from the tokens); the kernel checks it when it runs.
// CHECK-LABEL: func.func @rope_write
// CHECK:       %[[Q:.+]], %[[KC:.+]], %[[VC:.+]] = fused.rope_kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s1], i64>)
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.kv_cache_write
// CHECK:       aten.call "aten::copy_.default"(%{{.*}}, %[[KC]])
// CHECK:       func.return %[[Q]]
// The kernel writes the caches in place: the call returns q, and the copies back go.
// KERNEL-LABEL: func.func @rope_write
// KERNEL:      %[[Q:.+]] = kernel.call impl "reference" "irfuse::rope_kv_cache_write.default"(%{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, %{{.*}}, true, 64)
// KERNEL-NOT:  copy_
// KERNEL:      func.return %[[Q]]
func.func @rope_write(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s1], i64>) -> !irfuse.tensor<[s0, 4, 64], bf16> {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s1], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  %c1 = aten.call "aten::copy_.default"(%kc, %kc2) : (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) -> !irfuse.tensor<[32, 16, 2, 64], bf16>
  %c2 = aten.call "aten::copy_.default"(%vc, %vc2) : (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) -> !irfuse.tensor<[32, 16, 2, 64], bf16>
  func.return %qr : !irfuse.tensor<[s0, 4, 64], bf16>
}

// Per-head norms, RoPE and the cache write: with enable-qk-norm-rope-fusion first, one kernel
// (vLLM has this only on ROCm).
// KERNEL-LABEL: func.func @norm_rope_write
// KERNEL:      kernel.call impl "reference" "irfuse::rope_kv_cache_write.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, %{{.*}}, false, 32, eps = 1.0e-06)
// KERNEL-NOT:  norm.rms_norm
func.func @norm_rope_write(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 32], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 32], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %vc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// The rotated k is also returned: the fused op yields it too (k_out), and the `_k` kernel
// returns it beside q.
// CHECK-LABEL: func.func @k_read_elsewhere
// CHECK:       %[[Q:.+]], %[[KC:.+]], %{{.+}}, %[[K:.+]] = fused.rope_kv_cache_write
// CHECK-SAME:  k_out !irfuse.tensor<[s0, 2, 64], bf16>
// CHECK-NOT:   attn.rope
// CHECK:       func.return %[[Q]], %[[K]], %[[KC]]
// KERNEL-LABEL: func.func @k_read_elsewhere
// KERNEL:      %[[Q:.+]], %[[K:.+]] = kernel.call impl "reference" tuple "irfuse::rope_kv_cache_write_k.default"
// KERNEL:      func.return %[[Q]], %[[K]], %{{.*}}
func.func @k_read_elsewhere(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>) {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %kr, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>)
  func.return %qr, %kr, %kc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], bf16>
}

// An FP8 cache: k and v are static per-tensor FP8 quants (x / s) before the write. The fused op
// takes the unquantized k and v and the two scales; its kernel stores clamp(x / scale).
// CHECK-LABEL: func.func @rope_write_fp8
// CHECK:       %[[Q:.+]], %{{.+}}, %{{.+}} = fused.rope_kv_cache_write %{{.*}}, %{{.*}}, %[[V:[^ ,]+]], positions %{{.*}}, cos_sin_cache %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, k_scale %[[KS:[^ ,]+]], v_scale %[[VS:[^ ]+]] {
// CHECK-NOT:   quant.fp8
// CHECK-NOT:   attn.kv_cache_write
// CHECK:       func.return %[[Q]]
// KERNEL-LABEL: func.func @rope_write_fp8
// KERNEL:      kernel.call impl "reference" "irfuse::rope_kv_cache_write.default"({{.*}}, true, 64, k_scale = %{{.*}}, v_scale = %{{.*}})
// KERNEL-NOT:  quant.fp8
// KERNEL:      func.return
func.func @rope_write_fp8(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %vc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %slots: !irfuse.tensor<[s0], i64>, %ks: !irfuse.tensor<[], f32>, %vs: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4, 64], bf16> {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %k8 = quant.fp8 %kr, scale %ks {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %v8 = quant.fp8 %v, scale %vs {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %kc2, %vc2 = attn.kv_cache_write %k8, %v8, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>)
  %c1 = aten.call "aten::copy_.default"(%kc, %kc2) : (!irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>) -> !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>
  %c2 = aten.call "aten::copy_.default"(%vc, %vc2) : (!irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>) -> !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>
  func.return %qr : !irfuse.tensor<[s0, 4, 64], bf16>
}

// Not fused: the FP8 k is quantized as x * (1 / s) (no `divide`); the kernel divides.
// CHECK-LABEL: func.func @rope_write_fp8_reciprocal
// CHECK:       attn.rope
// CHECK:       quant.fp8
// CHECK:       attn.kv_cache_write
func.func @rope_write_fp8_reciprocal(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %vc: !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, %slots: !irfuse.tensor<[s0], i64>, %ks: !irfuse.tensor<[], f32>, %vs: !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>) {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %k8 = quant.fp8 %kr, scale %ks {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %v8 = quant.fp8 %v, scale %vs {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 2, 64], f8E4M3FN>
  %kc2, %vc2 = attn.kv_cache_write %k8, %v8, %kc, %vc, %slots : (!irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>)
  func.return %qr, %kc2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[32, 16, 2, 64], f8E4M3FN>
}

// vLLM's FlashAttention layout: one [2, blocks, block_size, heads, head_dim] cache given as both
// caches (k into [0], v into [1]); the kernel writes both halves of it in place.
// CHECK-LABEL: func.func @rope_write_flash
// CHECK:       fused.rope_kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{.*}}, %[[KV:[^ ,]+]], %[[KV]], %{{[^ ]+}} {
// CHECK-NOT:   attn.kv_cache_write
// KERNEL-LABEL: func.func @rope_write_flash
// KERNEL:      %[[Q:.+]] = kernel.call impl "reference" "irfuse::rope_kv_cache_write_flash.default"(%{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, true, 64)
// KERNEL-NOT:  copy_
// KERNEL:      func.return %[[Q]]
func.func @rope_write_flash(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %kv: !irfuse.tensor<[2, 32, 16, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[s0, 4, 64], bf16> {
  %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %kv1, %kv2 = attn.kv_cache_write %kr, %v, %kv, %kv, %slots : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[2, 32, 16, 2, 64], bf16>, !irfuse.tensor<[2, 32, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[2, 32, 16, 2, 64], bf16>, !irfuse.tensor<[2, 32, 16, 2, 64], bf16>)
  %c = aten.call "aten::copy_.default"(%kv, %kv2) : (!irfuse.tensor<[2, 32, 16, 2, 64], bf16>, !irfuse.tensor<[2, 32, 16, 2, 64], bf16>) -> !irfuse.tensor<[2, 32, 16, 2, 64], bf16>
  func.return %qr : !irfuse.tensor<[s0, 4, 64], bf16>
}
