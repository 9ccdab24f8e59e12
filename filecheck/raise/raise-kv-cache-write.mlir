// RUN: irfuse-opt %s -p raise-kv-cache-write | filecheck %s

// flat = cache.view(-1, kv_heads, head_dim); flat[slot_mapping] = k (index_put), the same for v,
// each viewed back and copied into the cache input at the end (aot_autograd's form of the in-place
// update). One op for k and v; the updated caches feed the gather and the copy_ back.
// CHECK-LABEL: func.func @index_put
// CHECK-SAME: (%[[K:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[S:.+]]: !irfuse.tensor<[s0], i64>, %[[BT:.+]]: !irfuse.tensor<[s0, 4], i32>, %[[KC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>, %[[VC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>)
// CHECK: %[[NK:.+]], %[[NV:.+]] = attn.kv_cache_write %[[K]], %[[V]], %[[KC]], %[[VC]], %[[S]] : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[B:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[AC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>, %[[BC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>, %[[AS:.+]]: !irfuse.tensor<[s0], i64>):
// CHECK-NEXT: %[[F0:.+]] = aten.call "aten::view.default"(%[[AC]], [-1, 2, 64])
// CHECK-NEXT: %[[U0:.+]] = aten.call "aten::index_put.default"(%[[F0]], [%[[AS]]], %[[A]])
// CHECK-NEXT: %[[N0:.+]] = aten.call "aten::view.default"(%[[U0]], [81, 16, 2, 64])
// CHECK-NEXT: %[[F1:.+]] = aten.call "aten::view.default"(%[[BC]], [-1, 2, 64])
// CHECK-NEXT: %[[U1:.+]] = aten.call "aten::index_put.default"(%[[F1]], [%[[AS]]], %[[B]])
// CHECK-NEXT: %[[N1:.+]] = aten.call "aten::view.default"(%[[U1]], [81, 16, 2, 64])
// CHECK-NEXT: irfuse.yield %[[N0]], %[[N1]]
// CHECK: "aten::index.Tensor"(%[[NK]], [%[[BT]]])
// CHECK: "aten::index.Tensor"(%[[NV]], [%[[BT]]])
// CHECK: "aten::copy_.default"(%[[KC]], %[[NK]])
// CHECK: "aten::copy_.default"(%[[VC]], %[[NV]])
func.func @index_put(%k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>, %bt: !irfuse.tensor<[s0, 4], i32>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[81, 16, 2, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) {
  %flat0 = aten.call "aten::view.default"(%kc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %upd0 = aten.call "aten::index_put.default"(%flat0, [%slots], %k) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %new0 = aten.call "aten::view.default"(%upd0, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %flat1 = aten.call "aten::view.default"(%vc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %upd1 = aten.call "aten::index_put.default"(%flat1, [%slots], %v) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %new1 = aten.call "aten::view.default"(%upd1, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %g0 = aten.call "aten::index.Tensor"(%new0, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %g1 = aten.call "aten::index.Tensor"(%new1, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %c0 = aten.call "aten::copy_.default"(%kc, %new0) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c1 = aten.call "aten::copy_.default"(%vc, %new1) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  func.return %g0, %g1 : !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
}

// index_copy_(0, slot_mapping, k) on the flattened cache.
// CHECK-LABEL: func.func @index_copy
// CHECK-SAME: (%[[K:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[S:.+]]: !irfuse.tensor<[s0], i64>, %{{.+}}: !irfuse.tensor<[s0, 4], i32>, %[[KC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>, %[[VC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>)
// CHECK: attn.kv_cache_write %[[K]], %[[V]], %[[KC]], %[[VC]], %[[S]]
// CHECK: "aten::index_copy.default"
// CHECK: "aten::index_copy.default"
func.func @index_copy(%k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>, %bt: !irfuse.tensor<[s0, 4], i32>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[81, 16, 2, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) {
  %flat0 = aten.call "aten::view.default"(%kc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %upd0 = aten.call "aten::index_copy.default"(%flat0, 0, %slots, %k) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %new0 = aten.call "aten::view.default"(%upd0, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %flat1 = aten.call "aten::view.default"(%vc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %upd1 = aten.call "aten::index_copy.default"(%flat1, 0, %slots, %v) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %new1 = aten.call "aten::view.default"(%upd1, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %g0 = aten.call "aten::index.Tensor"(%new0, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %g1 = aten.call "aten::index.Tensor"(%new1, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %c0 = aten.call "aten::copy_.default"(%kc, %new0) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c1 = aten.call "aten::copy_.default"(%vc, %new1) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  func.return %g0, %g1 : !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
}

// vLLM-style indexing of the 4-D cache by (slot // block_size, slot % block_size).
// CHECK-LABEL: func.func @block_offset
// CHECK-SAME: (%[[K:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[S:.+]]: !irfuse.tensor<[s0], i64>, %[[KC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>, %[[VC:.+]]: !irfuse.tensor<[81, 16, 2, 64], bf16>)
// CHECK: %[[NK:.+]], %[[NV:.+]] = attn.kv_cache_write %[[K]], %[[V]], %[[KC]], %[[VC]], %[[S]]
// CHECK: "aten::div.Tensor_mode"
// CHECK: "aten::remainder.Scalar"
// CHECK: irfuse.yield
// CHECK: "aten::copy_.default"(%[[KC]], %[[NK]])
func.func @block_offset(%k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[s0], i64> {
  %blk = aten.call "aten::div.Tensor_mode"(%slots, 16, rounding_mode = "floor") : (!irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[s0], i64>
  %off = aten.call "aten::remainder.Scalar"(%slots, 16) : (!irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[s0], i64>
  %nk = aten.call "aten::index_put.default"(%kc, [%blk, %off], %k) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %nv = aten.call "aten::index_put.default"(%vc, [%blk, %off], %v) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c0 = aten.call "aten::copy_.default"(%kc, %nk) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c1 = aten.call "aten::copy_.default"(%vc, %nv) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  func.return %slots : !irfuse.tensor<[s0], i64>
}

// Block size 1, the T new tokens written to slots [0, T) by slice assignment (copy + slice_scatter):
// the op's slot mapping is the range 0 .. T-1, made beside it from k (new_ones, cumsum, add).
// CHECK-LABEL: func.func @slice_scatter
// CHECK-SAME: (%[[T:.+]]: !irfuse.sym<s0>, %[[K:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[s0, 2, 64], bf16>, %[[KC:.+]]: !irfuse.tensor<[1041, 1, 2, 64], bf16>, %[[VC:.+]]: !irfuse.tensor<[1041, 1, 2, 64], bf16>)
// CHECK: %[[ONES:.+]] = aten.call "aten::new_ones.default"(%[[K]], [%[[T]]], dtype = i64) : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0], i64>
// CHECK-NEXT: %[[CS:.+]] = aten.call "aten::cumsum.default"(%[[ONES]], 0)
// CHECK-NEXT: %[[SLOTS:.+]] = aten.call "aten::add.Scalar"(%[[CS]], -1)
// CHECK-NEXT: %[[NK:.+]], %[[NV:.+]] = attn.kv_cache_write %[[K]], %[[V]], %[[KC]], %[[VC]], %[[SLOTS]]
// CHECK: "aten::slice_scatter.default"
// CHECK: "aten::slice_scatter.default"
// CHECK: irfuse.yield
// CHECK: "aten::copy_.default"(%[[KC]], %[[NK]])
func.func @slice_scatter(%t: !irfuse.sym<s0>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %kc: !irfuse.tensor<[1041, 1, 2, 64], bf16>, %vc: !irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16> {
  %a0 = aten.call "aten::view.default"(%kc, [-1, 2, 64]) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %s0 = aten.call "aten::slice.Tensor"(%a0, 0, 0, %t) : (!irfuse.tensor<[1041, 2, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %cp0 = aten.call "aten::copy.default"(%s0, %k) : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %b0 = aten.call "aten::view.default"(%kc, [-1, 2, 64]) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %u0 = aten.call "aten::slice_scatter.default"(%b0, %cp0, 0, 0, %t) : (!irfuse.tensor<[1041, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %new0 = aten.call "aten::view.default"(%u0, [1041, 1, 2, 64]) : (!irfuse.tensor<[1041, 2, 64], bf16>) -> !irfuse.tensor<[1041, 1, 2, 64], bf16>
  %a1 = aten.call "aten::view.default"(%vc, [-1, 2, 64]) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %s1 = aten.call "aten::slice.Tensor"(%a1, 0, 0, %t) : (!irfuse.tensor<[1041, 2, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %cp1 = aten.call "aten::copy.default"(%s1, %v) : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %b1 = aten.call "aten::view.default"(%vc, [-1, 2, 64]) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %u1 = aten.call "aten::slice_scatter.default"(%b1, %cp1, 0, 0, %t) : (!irfuse.tensor<[1041, 2, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1041, 2, 64], bf16>
  %new1 = aten.call "aten::view.default"(%u1, [1041, 1, 2, 64]) : (!irfuse.tensor<[1041, 2, 64], bf16>) -> !irfuse.tensor<[1041, 1, 2, 64], bf16>
  %c0 = aten.call "aten::copy_.default"(%kc, %new0) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>, !irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 1, 2, 64], bf16>
  %c1 = aten.call "aten::copy_.default"(%vc, %new1) : (!irfuse.tensor<[1041, 1, 2, 64], bf16>, !irfuse.tensor<[1041, 1, 2, 64], bf16>) -> !irfuse.tensor<[1041, 1, 2, 64], bf16>
  func.return %k : !irfuse.tensor<[s0, 2, 64], bf16>
}

// Not raised: index_copy along dim 1 (heads, not slots); an accumulating index_put; an index of
// s1 slots for s0 new tokens (not the slot mapping of the current tokens); an update never copied
// back into the cache input; a k write whose v partner is one of those.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT: attn.kv_cache_write
// CHECK: func.return
func.func @negatives(%k: !irfuse.tensor<[s0, 2, 64], bf16>, %v: !irfuse.tensor<[s0, 2, 64], bf16>, %slots: !irfuse.tensor<[s0], i64>, %other: !irfuse.tensor<[s1], i64>, %heads: !irfuse.tensor<[2], i64>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %kc2: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc2: !irfuse.tensor<[81, 16, 2, 64], bf16>) -> (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) {
  %f0 = aten.call "aten::view.default"(%kc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %u0 = aten.call "aten::index_copy.default"(%f0, 1, %heads, %k) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[2], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %n0 = aten.call "aten::view.default"(%u0, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %f1 = aten.call "aten::view.default"(%vc, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %u1 = aten.call "aten::index_put.default"(%f1, [%slots], %v, true) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %n1 = aten.call "aten::view.default"(%u1, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %f2 = aten.call "aten::view.default"(%kc2, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %u2 = aten.call "aten::index_put.default"(%f2, [%other], %k) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s1], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %n2 = aten.call "aten::view.default"(%u2, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %f3 = aten.call "aten::view.default"(%vc2, [-1, 2, 64]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %u3 = aten.call "aten::index_put.default"(%f3, [%slots], %v) : (!irfuse.tensor<[1296, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[1296, 2, 64], bf16>
  %n3 = aten.call "aten::view.default"(%u3, [81, 16, 2, 64]) : (!irfuse.tensor<[1296, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c0 = aten.call "aten::copy_.default"(%kc, %n0) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c1 = aten.call "aten::copy_.default"(%vc, %n1) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  %c2 = aten.call "aten::copy_.default"(%kc2, %n2) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>) -> !irfuse.tensor<[81, 16, 2, 64], bf16>
  func.return %n3, %n2 : !irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>
}
