// RUN: irfuse-opt %s -p fuse-rope-kvcache-cat-mla | filecheck %s
// RUN: irfuse-opt %s -p fuse-rope-kvcache-cat-mla,select-kernels | filecheck %s --check-prefix=KERNEL

// MLA: RoPE of q_pe [T, 4, 16] and k_pe [T, 1, 16], the rotated key viewed [T, 16] into the
// latent-cache write with kv_c: one op returning q_pe and k_pe rotated (attention reads both)
// and the cache; the kernel writes the cache in place, so the copy back goes.
// CHECK-LABEL: func.func @rope_cat_write
// CHECK:       %[[Q:.+]], %[[K:.+]], %[[C:.+]] = fused.rope_mla_kv_cache_write %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}}, positions %{{[^ ,]+}}, cos_sin_cache %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ]+}} {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.mla_kv_cache_write
// CHECK:       aten.call "aten::copy_.default"(%{{.*}}, %[[C]])
// CHECK:       func.return %[[Q]], %[[K]]
// KERNEL-LABEL: func.func @rope_cat_write
// KERNEL:      %{{.+}}, %{{.+}} = kernel.call impl "reference" tuple "irfuse::rope_mla_kv_cache_write.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, false, 16)
// KERNEL-NOT:  copy_
func.func @rope_cat_write(%q_pe: !irfuse.tensor<[s0, 4, 16], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %kv_c: !irfuse.tensor<[s0, 32], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cs: !irfuse.tensor<[64, 16], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>) {
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %pos, cos_sin_cache %cs {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, k_out !irfuse.tensor<[s0, 1, 16], bf16>)
  %k2 = aten.call "aten::squeeze.dim"(%kr, 1) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  %c2 = attn.mla_kv_cache_write %kv_c, %k2, %cache, %slots : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[4, 4, 48], bf16>
  %c = aten.call "aten::copy_.default"(%cache, %c2) : (!irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return %qr, %kr : !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>
}

// The rotated q_pe is read before the write, and the write's operands all exist before the rope:
// the fused op takes the rope's place.
// CHECK-LABEL: func.func @read_before_write
// CHECK:       %[[Q:.+]], %{{.+}}, %{{.+}} = fused.rope_mla_kv_cache_write
// CHECK-NEXT:  aten.call "aten::mul.Tensor"(%[[Q]], %[[Q]])
func.func @read_before_write(%q_pe: !irfuse.tensor<[s0, 4, 16], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %kv_c: !irfuse.tensor<[s0, 32], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cs: !irfuse.tensor<[64, 16], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) {
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %pos, cos_sin_cache %cs {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, k_out !irfuse.tensor<[s0, 1, 16], bf16>)
  %sq = aten.call "aten::mul.Tensor"(%qr, %qr) : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
  %k2 = aten.call "aten::view.default"(%kr, [-1, 16]) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  %c2 = attn.mla_kv_cache_write %kv_c, %k2, %cache, %slots : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return %sq, %c2 : !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>
}

// Not fused: the view of the rotated key the write reads is also read elsewhere.
// CHECK-LABEL: func.func @view_read_elsewhere
// CHECK:       attn.rope
// CHECK:       attn.mla_kv_cache_write
// CHECK-NOT:   fused.
func.func @view_read_elsewhere(%q_pe: !irfuse.tensor<[s0, 4, 16], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %kv_c: !irfuse.tensor<[s0, 32], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cs: !irfuse.tensor<[64, 16], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) {
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %pos, cos_sin_cache %cs {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s0, 4, 16], bf16>, k_out !irfuse.tensor<[s0, 1, 16], bf16>)
  %k2 = aten.call "aten::view.default"(%kr, [-1, 16]) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  %c2 = attn.mla_kv_cache_write %kv_c, %k2, %cache, %slots : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return %qr, %k2, %c2 : !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>
}

// vLLM's own latent-cache write of the rotated k_pe (the layer's cache found through vLLM's
// forward context at run time): one op at the write's place returning q_pe and k_pe rotated and
// vLLM's dummy, which the attention reads; its kernel takes the layer name and kv_cache_dtype.
// CHECK-LABEL: func.func @vllm_write
// CHECK:       %[[Q:.+]], %[[K:.+]], %[[DEP:.+]] = fused.rope_vllm_mla_kv_cache_update %arg1, %arg2, %arg3, positions %arg4, cos_sin_cache %arg5, %arg6, layer %ln {layer_name = "model.layers.0.self_attn.mla_attn", is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64, kv_cache_dtype = "auto"}
// CHECK-NOT:   attn.rope
// CHECK-NOT:   attn.vllm_mla_kv_cache_update
// CHECK:       attn.vllm_mla_attention %{{[^ ,]+}}, %arg3, %[[K]], kv_cache_dep %[[DEP]], layer %ln
// KERNEL-LABEL: func.func @vllm_write
// KERNEL:      kernel.call impl "reference" tuple "irfuse::rope_vllm_mla_kv_cache_update.default"(%arg1, %arg2, %arg3, %arg4, %arg5, none, none, %arg6, %ln, "auto", false, 16)
func.func @vllm_write(%arg0: !irfuse.sym<s30>, %arg1: !irfuse.tensor<[s30, 4, 16], bf16>, %arg2: !irfuse.tensor<[s30, 1, 16], bf16>, %arg3: !irfuse.tensor<[s30, 32], bf16>, %arg4: !irfuse.tensor<[s30], i64>, %arg5: !irfuse.tensor<[64, 16], bf16>, %arg6: !irfuse.tensor<[], f32>, %q: !irfuse.tensor<[s30, 4, 32], bf16>, %ln: !irfuse.opaque<"LayerName"> {irfuse.layer_name = "model.layers.0.self_attn.mla_attn"}) -> !irfuse.tensor<[s30, 32], bf16> {
  %qr, %kr = attn.rope %arg1, k %arg2, positions %arg4, cos_sin_cache %arg5 {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[s30], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s30, 4, 16], bf16>, k_out !irfuse.tensor<[s30, 1, 16], bf16>)
  %dep = attn.vllm_mla_kv_cache_update %arg3, %kr, %arg6, layer %ln {layer_name = "model.layers.0.self_attn.mla_attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[], f32>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  %qs = aten.call "aten::slice_scatter.default"(%q, %qr, 2, 16, 32) : (!irfuse.tensor<[s30, 4, 32], bf16>, !irfuse.tensor<[s30, 4, 16], bf16>) -> !irfuse.tensor<[s30, 4, 32], bf16>
  %o = attn.vllm_mla_attention %qs, %arg3, %kr, kv_cache_dep %dep, layer %ln {layer_name = "model.layers.0.self_attn.mla_attn"} : (!irfuse.tensor<[s30, 4, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s30, 32], bf16>
  func.return %o : !irfuse.tensor<[s30, 32], bf16>
}

// vLLM's in-place rotary on views of one buffer (MLA's q[..., 16:] and k_pe, a view of the kv
// projection), functionalized: the rotated pieces are scattered back into a rebuilt buffer and
// the write reads k_pe out of it again (split, split, unsqueeze). Through those reads the write
// stores exactly the rotated k_pe: fused at the rope's place (the scatters read the rotated values
// before the write), the rebuilt buffer left to the attention.
// CHECK-LABEL: func.func @vllm_write_in_place_rope
// CHECK:       %[[Q:.+]], %[[K:.+]], %[[DEP:.+]] = fused.rope_vllm_mla_kv_cache_update %[[QV:[^ ,]+]], %[[KV:[^ ,]+]], %{{[^ ,]+}}, positions %arg3
// CHECK-NEXT:  aten.call "aten::as_strided_scatter.default"(%{{[^ ,]+}}, %[[Q]],
// CHECK-NEXT:  %[[RB:.+]] = aten.call "aten::as_strided_scatter.default"(%{{[^ ,]+}}, %[[K]],
// CHECK-NOT:   attn.vllm_mla_kv_cache_update
// CHECK:       attn.vllm_mla_attention %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}}, kv_cache_dep %[[DEP]]
func.func @vllm_write_in_place_rope(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 176], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.tensor<[s77], i64>, %arg4: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s77, 32], bf16> {
  %split, %split_1 = aten.call tuple "aten::split_with_sizes.default"(%arg1, [128, 48], -1) : (!irfuse.tensor<[s77, 176], bf16>) -> (!irfuse.tensor<[s77, 128], bf16>, !irfuse.tensor<[s77, 48], bf16>)
  %kv_c, %unused = aten.call tuple "aten::split_with_sizes.default"(%split_1, [32, 16], -1) : (!irfuse.tensor<[s77, 48], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %q_pe = aten.call "aten::as_strided.default"(%arg1, [%arg0, 4, 16], [176, 32, 1], 16) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 4, 16], bf16>
  %k_pe = aten.call "aten::as_strided.default"(%arg1, [%arg0, 1, 16], [176, 16, 1], 160) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %arg3, cos_sin_cache %arg2 {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s77, 4, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s77], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s77, 4, 16], bf16>, k_out !irfuse.tensor<[s77, 1, 16], bf16>)
  %r1 = aten.call "aten::as_strided_scatter.default"(%arg1, %qr, [%arg0, 4, 16], [176, 32, 1], 16) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.tensor<[s77, 4, 16], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 176], bf16>
  %r2 = aten.call "aten::as_strided_scatter.default"(%r1, %kr, [%arg0, 1, 16], [176, 16, 1], 160) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 176], bf16>
  %s4, %s5 = aten.call tuple "aten::split_with_sizes.default"(%r2, [128, 48], -1) : (!irfuse.tensor<[s77, 176], bf16>) -> (!irfuse.tensor<[s77, 128], bf16>, !irfuse.tensor<[s77, 48], bf16>)
  %s6, %s7 = aten.call tuple "aten::split_with_sizes.default"(%s5, [32, 16], -1) : (!irfuse.tensor<[s77, 48], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %k_read = aten.call "aten::unsqueeze.default"(%s7, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %dep = attn.vllm_mla_kv_cache_update %kv_c, %k_read, %arg4 {layer_name = "model.layers.0.self_attn.mla_attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[0], bf16>
  %q = aten.call "aten::view.default"(%s4, [%arg0, 4, 32]) : (!irfuse.tensor<[s77, 128], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 4, 32], bf16>
  %o = attn.vllm_mla_attention %q, %kv_c, %k_read, kv_cache_dep %dep {layer_name = "model.layers.0.self_attn.mla_attn"} : (!irfuse.tensor<[s77, 4, 32], bf16>, !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
  func.return %o : !irfuse.tensor<[s77, 32], bf16>
}

// The same, but the write reads a region of the rebuilt buffer that is not the rotated k_pe
// (one element off): not the rope's k, so the rope and the write stay apart, with the remark.
// CHECK-LABEL: func.func @vllm_write_reads_another_region
// CHECK:       attn.rope
// CHECK:       attn.vllm_mla_kv_cache_update
// CHECK-NOT:   fused.
func.func @vllm_write_reads_another_region(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 176], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.tensor<[s77], i64>, %arg4: !irfuse.tensor<[], f32>, %kv_c: !irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[0], bf16> {
  %q_pe = aten.call "aten::as_strided.default"(%arg1, [%arg0, 4, 16], [176, 32, 1], 16) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 4, 16], bf16>
  %k_pe = aten.call "aten::as_strided.default"(%arg1, [%arg0, 1, 16], [176, 16, 1], 160) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %qr, %kr = attn.rope %q_pe, k %k_pe, positions %arg3, cos_sin_cache %arg2 {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s77, 4, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s77], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s77, 4, 16], bf16>, k_out !irfuse.tensor<[s77, 1, 16], bf16>)
  %r1 = aten.call "aten::as_strided_scatter.default"(%arg1, %qr, [%arg0, 4, 16], [176, 32, 1], 16) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.tensor<[s77, 4, 16], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 176], bf16>
  %r2 = aten.call "aten::as_strided_scatter.default"(%r1, %kr, [%arg0, 1, 16], [176, 16, 1], 160) : (!irfuse.tensor<[s77, 176], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 176], bf16>
  %off = aten.call "aten::slice.Tensor"(%r2, 1, 159, 175) : (!irfuse.tensor<[s77, 176], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  %k_read = aten.call "aten::unsqueeze.default"(%off, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %dep = attn.vllm_mla_kv_cache_update %kv_c, %k_read, %arg4 {layer_name = "model.layers.0.self_attn.mla_attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[0], bf16>
  func.return %dep : !irfuse.tensor<[0], bf16>
}
