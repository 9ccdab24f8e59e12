// RUN: irfuse-opt %s --split-input-file -p fuse-qk-norm-rope-kvcache | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p fuse-qk-norm-rope-kvcache,select-kernels | filecheck %s --check-prefix=KERNEL

// Inside vLLM: per-head norms of q and k, RoPE, vLLM's own cache write of the rotated k (the
// cache found by the layer name at run time), then vLLM's attention. One op at the rope's place
// takes the norms' inputs and weights and returns the rotated q and k and vLLM's dummy; v's
// view (made after the rope) moves up with it.
// CHECK-LABEL: func.func @norm_rope_update
// CHECK:       %[[V:.+]] = aten.call "aten::view.default"(%{{.+}}, [-1, 2, 64])
// CHECK-NEXT:  %[[QR:.+]], %[[KR:.+]], %[[DEP:.+]] = fused.rope_vllm_kv_cache_update %[[Q:[^ ,]+]], %[[K:[^ ,]+]], %[[V]], q_weight %[[QW:[^ ,]+]], k_weight %[[KW:[^ ,]+]], positions %{{.+}}, cos_sin_cache %{{.+}}, layer %[[LN:[^ ]+]] {layer_name = "model.layers.0.self_attn.attn", is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64, eps = 1.000000e-06 : f64}
// CHECK-NOT:   norm.rms_norm
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.vllm_kv_cache_update
// CHECK:       attn.vllm_attention %[[QR]], %[[KR]], %[[V]], kv_cache_dep %[[DEP]], layer %[[LN]]
// KERNEL-LABEL: func.func @norm_rope_update
// KERNEL:      kernel.call impl "reference" tuple "irfuse::rope_vllm_kv_cache_update.default"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, none, none, %{{.+}}, true, 64, eps = 1.0e-06)
// KERNEL-NOT:  norm.rms_norm
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @norm_rope_update(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %vf: !irfuse.tensor<[s0, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %ln: !irfuse.opaque<"LayerName"> {irfuse.layer_name = "model.layers.0.self_attn.attn"}) -> !irfuse.tensor<[s0, 4, 64], bf16> {
    %qn = norm.rms_norm %q, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
    %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %v = aten.call "aten::view.default"(%vf, [-1, 2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %dep = attn.vllm_kv_cache_update %kr, %v, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
    %o = attn.vllm_attention %qr, %kr, %v, kv_cache_dep %dep, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s0, 4, 64], bf16>
    func.return %o : !irfuse.tensor<[s0, 4, 64], bf16>
  }
}

// -----

// RoPE + vLLM's write without QK norm: no candidate (fuse-rope-kvcache's).
// CHECK-LABEL: func.func @no_norms
// KERNEL-LABEL: func.func @no_norms
// CHECK:       attn.rope
// CHECK:       attn.vllm_kv_cache_update
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @no_norms(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>) {
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %dep = attn.vllm_kv_cache_update %kr, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[0], bf16>
    func.return %qr, %dep : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>
  }
}

// -----

// Only q normalized per head: a remark, nothing changes.
// CHECK-LABEL: func.func @only_q_normed
// CHECK:       norm.rms_norm
// CHECK:       attn.rope
// CHECK:       attn.vllm_kv_cache_update
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @only_q_normed(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>) {
    %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
    %qr, %kr = attn.rope %qn, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %dep = attn.vllm_kv_cache_update %kr, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[0], bf16>
    func.return %qr, %dep : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>
  }
}
