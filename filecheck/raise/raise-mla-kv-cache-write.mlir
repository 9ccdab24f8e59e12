// RUN: irfuse-opt %s -p raise-mla-kv-cache-write | filecheck %s

// cache.view(-1, 48).index_copy_(0, slots, cat([kv_c, k_pe], -1)), copied back into the cache
// input: one op taking the latent, the rope key, the cache and the slots; the chain (view, cat,
// index_copy, view back) is its decomposition and the copy_ stays as the store.
// CHECK-LABEL: func.func @index_copy
// CHECK-SAME: (%[[KVC:.+]]: !irfuse.tensor<[s0, 32], bf16>, %[[KPE:.+]]: !irfuse.tensor<[s0, 16], bf16>, %[[C:.+]]: !irfuse.tensor<[4, 4, 48], bf16>, %[[S:.+]]: !irfuse.tensor<[s0], i64>)
// CHECK: %[[N:.+]] = attn.mla_kv_cache_write %[[KVC]], %[[KPE]], %[[C]], %[[S]] : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[4, 4, 48], bf16> decomposition {
// CHECK:      aten.call "aten::cat.default"
// CHECK:      aten.call "aten::index_copy.default"
// CHECK: "aten::copy_.default"(%[[C]], %[[N]])
func.func @index_copy(%kv_c: !irfuse.tensor<[s0, 32], bf16>, %k_pe: !irfuse.tensor<[s0, 16], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) {
  %flat = aten.call "aten::view.default"(%cache, [-1, 48]) : (!irfuse.tensor<[4, 4, 48], bf16>) -> !irfuse.tensor<[16, 48], bf16>
  %row = aten.call "aten::cat.default"([%kv_c, %k_pe], -1) : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 16], bf16>) -> !irfuse.tensor<[s0, 48], bf16>
  %upd = aten.call "aten::index_copy.default"(%flat, 0, %slots, %row) : (!irfuse.tensor<[16, 48], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 48], bf16>) -> !irfuse.tensor<[16, 48], bf16>
  %new = aten.call "aten::view.default"(%upd, [4, 4, 48]) : (!irfuse.tensor<[16, 48], bf16>) -> !irfuse.tensor<[4, 4, 48], bf16>
  %c = aten.call "aten::copy_.default"(%cache, %new) : (!irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return
}

// Not a candidate: rows that are not a concatenation of the latent and the key (a 3-D cache
// written with anything else is left as it is, without a remark).
// CHECK-LABEL: func.func @plain_rows
// CHECK-NOT: attn.mla_kv_cache_write
// CHECK: aten.call "aten::index_copy.default"
func.func @plain_rows(%row: !irfuse.tensor<[s0, 48], bf16>, %cache: !irfuse.tensor<[4, 4, 48], bf16>, %slots: !irfuse.tensor<[s0], i64>) {
  %flat = aten.call "aten::view.default"(%cache, [-1, 48]) : (!irfuse.tensor<[4, 4, 48], bf16>) -> !irfuse.tensor<[16, 48], bf16>
  %upd = aten.call "aten::index_copy.default"(%flat, 0, %slots, %row) : (!irfuse.tensor<[16, 48], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 48], bf16>) -> !irfuse.tensor<[16, 48], bf16>
  %new = aten.call "aten::view.default"(%upd, [4, 4, 48]) : (!irfuse.tensor<[16, 48], bf16>) -> !irfuse.tensor<[4, 4, 48], bf16>
  %c = aten.call "aten::copy_.default"(%cache, %new) : (!irfuse.tensor<[4, 4, 48], bf16>, !irfuse.tensor<[4, 4, 48], bf16>) -> !irfuse.tensor<[4, 4, 48], bf16>
  func.return
}
