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
