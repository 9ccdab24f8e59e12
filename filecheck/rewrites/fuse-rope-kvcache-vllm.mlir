// RUN: irfuse-opt %s --split-input-file -p fuse-rope-kvcache | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p enable-qk-norm-rope-fusion,fuse-rope-kvcache,select-kernels | filecheck %s --check-prefix=KERNEL

// vLLM's layer: RoPE of q and k, Attention.forward's views, vLLM's cache write of the rotated k
// (the cache found by the layer name at run time), then vLLM's attention, which reads the
// rotated q and k too. One op at the rope's place returns the rotated q and k and vLLM's dummy;
// v's view (made after the rope) moves up with it.
// CHECK-LABEL: func.func @rope_update
// CHECK:       %[[V:.+]] = aten.call "aten::view.default"(%{{.+}}, [-1, 2, 64])
// CHECK-NEXT:  %[[QR:.+]], %[[KR:.+]], %[[DEP:.+]] = fused.rope_vllm_kv_cache_update %{{.+}}, %{{.+}}, %[[V]], positions %{{.+}}, cos_sin_cache %{{.+}}, layer %[[LN:[^ ]+]] {layer_name = "model.layers.0.self_attn.attn", is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>, !irfuse.opaque<"LayerName">) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[0], bf16>)
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.vllm_kv_cache_update
// CHECK:       %[[KF:.+]] = aten.call "aten::flatten.using_ints"(%[[KR]], 1, 2)
// CHECK:       %[[KV:.+]] = aten.call "aten::view.default"(%[[KF]], [-1, 2, 64])
// CHECK:       attn.vllm_attention %[[QR]], %[[KV]], %[[V]], kv_cache_dep %[[DEP]], layer %[[LN]]
// KERNEL-LABEL: func.func @rope_update
// KERNEL:      %{{.+}}, %{{.+}}, %{{.+}} = kernel.call impl "reference" tuple "irfuse::rope_vllm_kv_cache_update.default"(%{{.+}}, %{{.+}}, %{{.+}}, none, none, %{{.+}}, %{{.+}}, none, none, %{{.+}}, true, 64)
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @rope_update(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %vf: !irfuse.tensor<[s0, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %ln: !irfuse.opaque<"LayerName"> {irfuse.layer_name = "model.layers.0.self_attn.attn"}) -> !irfuse.tensor<[s0, 4, 64], bf16> {
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %kf = aten.call "aten::flatten.using_ints"(%kr, 1, 2) : (!irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
    %kv = aten.call "aten::view.default"(%kf, [-1, 2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %v = aten.call "aten::view.default"(%vf, [-1, 2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %dep = attn.vllm_kv_cache_update %kv, %v, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
    %o = attn.vllm_attention %qr, %kv, %v, kv_cache_dep %dep, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s0, 4, 64], bf16>
    func.return %o : !irfuse.tensor<[s0, 4, 64], bf16>
  }
}

// -----

// vLLM's in-place `_C.rotary_embedding` on slices of one qkv buffer: raise-vllm-ops rebuilds the
// buffer with the rotated pieces scattered back, and the split after it gives k and v: k is read
// where it was scattered, v from the buffer before the scatters (a new slice at the rope's place).
// With the per-head norms (enable-qk-norm-rope-fusion first), norms, RoPE and write are one kernel.
// CHECK-LABEL: func.func @scattered
// CHECK:       %[[VS:.+]] = aten.call "aten::slice.Tensor"(%[[QKV:[^ ,]+]], 1, 384, 512)
// CHECK-NEXT:  %[[V:.+]] = aten.call "aten::view.default"(%[[VS]], [-1, 2, 64])
// CHECK-NEXT:  fused.rope_vllm_kv_cache_update %{{.+}}, %{{.+}}, %[[V]], positions
// CHECK-NOT:   attn.vllm_kv_cache_update
// KERNEL-LABEL: func.func @scattered
// KERNEL:      kernel.call impl "reference" tuple "irfuse::rope_vllm_kv_cache_update.default"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, none, none, "l0", false, 32, eps = 1.0e-06)
// KERNEL-NOT:  norm.rms_norm
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @scattered(%qkv: !irfuse.tensor<[s0, 512], bf16>, %q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 32], bf16>) -> (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[0], bf16>) {
    %qn = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
    %kn = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 32], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %qf = aten.call "aten::flatten.using_ints"(%qr, 1, 2) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
    %s1 = aten.call "aten::slice_scatter.default"(%qkv, %qf, 1, 0, 256) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
    %kf = aten.call "aten::flatten.using_ints"(%kr, 1, 2) : (!irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
    %s2 = aten.call "aten::slice_scatter.default"(%s1, %kf, 1, 256, 384) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
    %qs, %ks, %vs = aten.call tuple "aten::split_with_sizes.default"(%s2, [256, 128, 128], -1) : (!irfuse.tensor<[s0, 512], bf16>) -> (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>)
    %kv = aten.call "aten::view.default"(%ks, [-1, 2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %vv = aten.call "aten::view.default"(%vs, [-1, 2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %dep = attn.vllm_kv_cache_update %kv, %vv {layer_name = "l0"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[0], bf16>
    func.return %s2, %dep : !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[0], bf16>
  }
}

// -----

// Not fused (remarks: tests/fusions/test_rope_kvcache_in_vllm.py): v computed after the rope by
// more than views; on sm100 the kernel inside vLLM is not measured (left to Inductor).
// CHECK-LABEL: func.func @late_v
// CHECK:       attn.rope
// CHECK:       attn.vllm_kv_cache_update
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @late_v(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> !irfuse.tensor<[0], bf16> {
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %v = aten.call "aten::mul.Tensor"(%kr, 2) : (!irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    %dep = attn.vllm_kv_cache_update %kr, %v {layer_name = "l0"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[0], bf16>
    func.return %dep : !irfuse.tensor<[0], bf16>
  }
}

// -----

// CHECK-LABEL: func.func @sm100
// CHECK:       attn.rope
// CHECK:       attn.vllm_kv_cache_update
builtin.module attributes {irfuse.platform = "cuda:sm100"} {
  func.func @sm100(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>) {
    %qr, %kr = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
    %dep = attn.vllm_kv_cache_update %kr, %v {layer_name = "l0"} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[0], bf16>
    func.return %qr, %dep : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[0], bf16>
  }
}
