// RUN: irfuse-opt %s -p raise-vllm-ops | filecheck %s

// Trimmed from real dumps (torch 2.13, the tests/vllm_ops.py stand-in for vLLM's
// `vllm::flashinfer_rotary_embedding`, FlashInfer's rope as DeepSeek's YaRN rotary calls it on CUDA).
// It means what `_C::rotary_embedding` means (q and k rotated in place, rotary_dim the cache's
// width) and is raised the same way, to `attn.rope`; its cos_sin_cache is float32 (FlashInfer takes
// no other), and the call stays in the region, where `rotates_in_f32` finds it: the fused kernels
// rotate in float32 as FlashInfer does.

// auto_functionalized_v2, q and k slices of one qkv buffer (NeoX): attn.rope on `[T, heads, 16]`
// views with the f32 cache as is; the new base is rebuilt after it by slice_scatter.
// CHECK-LABEL: func.func @v2_flat
// CHECK: %[[MUL:.+]] = aten.call "aten::mul.Tensor"
// CHECK-NEXT: %[[QS:.+]] = aten.call "aten::slice.Tensor"(%[[MUL]], 1, 0, 32)
// CHECK-NEXT: %[[Q:.+]] = aten.call "aten::unflatten.int"(%[[QS]], 1, [2, 16])
// CHECK-NEXT: %[[KS:.+]] = aten.call "aten::slice.Tensor"(%[[MUL]], 1, 32, 48)
// CHECK-NEXT: %[[K:.+]] = aten.call "aten::unflatten.int"(%[[KS]], 1, [1, 16])
// CHECK-NEXT: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[Q]], k %[[K]], positions %arg4, cos_sin_cache %arg2 {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], f32>) -> (!irfuse.tensor<[s77, 2, 16], bf16>, k_out !irfuse.tensor<[s77, 1, 16], bf16>) decomposition {
// CHECK-NEXT: ^{{.*}}(
// CHECK-NEXT: %{{.+}}, %[[NB:.+]] = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::flashinfer_rotary_embedding.default">, {{.*}}_all_bases = [%[[MUL]]])
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[QF:.+]] = aten.call "aten::flatten.using_ints"(%[[QR]], 1, 2)
// CHECK-NEXT: %[[B1:.+]] = aten.call "aten::slice_scatter.default"(%[[MUL]], %[[QF]], 1, 0, 32)
// CHECK-NEXT: %[[KF:.+]] = aten.call "aten::flatten.using_ints"(%[[KR]], 1, 2)
// CHECK-NEXT: %[[B2:.+]] = aten.call "aten::slice_scatter.default"(%[[B1]], %[[KF]], 1, 32, 48)
// CHECK-NEXT: aten.call tuple "aten::split_with_sizes.default"(%[[B2]], [32, 16, 16], -1)
func.func @v2_flat(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 64], bf16>, %arg2: !irfuse.tensor<[64, 16], f32>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::flashinfer_rotary_embedding.default">, positions = %arg4, head_size = 16, cos_sin_cache = %arg2, is_neox = true, _query_base_index = 0, _query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 32, _key_base_index = 0, _key_slice_dim = 1, _key_slice_start = 32, _key_slice_end = 48, _all_bases = [%mul]) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 64], bf16>)
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%split_with_sizes, 1) : (!irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
  %split_with_sizes_3, %split_with_sizes_4, %split_with_sizes_5 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_2 = aten.call "aten::mul.Tensor"(%split_with_sizes_4, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  %split_with_sizes_6, %split_with_sizes_7, %split_with_sizes_8 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_3 = aten.call "aten::mul.Tensor"(%split_with_sizes_8, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  func.return %mul_1, %mul_2, %mul_3 : !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>
}

// auto_functionalized (v1, vLLM's default), DeepSeek's MLA (GPT-J): q_pe the rope part of each
// head of q (`q.view(-1, H, nope + rope)[..., nope:]`), k_pe the one-head `[T, 1, R]` view of the
// kv_a output's rope part; both already head-shaped, read by attn.rope as they are.
// CHECK-LABEL: func.func @v1_mla
// CHECK: %[[KPE:.+]] = aten.call "aten::unsqueeze.default"
// CHECK-NEXT: %[[QPE:.+]] = aten.call "aten::slice.Tensor"(%{{.+}}, 2, 16, 9223372036854775807)
// CHECK-NEXT: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[QPE]], k %[[KPE]], positions %arg4, cos_sin_cache %arg2 {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], f32>) -> (!irfuse.tensor<[s77, 2, 16], bf16>, k_out !irfuse.tensor<[s77, 1, 16], bf16>) decomposition {
// CHECK-NEXT: ^{{.*}}(%[[BQ:.+]]: !irfuse.tensor<[s77, 2, 16], bf16>, %[[BK:.+]]: !irfuse.tensor<[s77, 1, 16], bf16>, %[[BP:.+]]: !irfuse.tensor<[s80], i64>, %[[BC:.+]]: !irfuse.tensor<[64, 16], f32>):
// CHECK-NEXT: %{{.+}}, %[[NQ:.+]], %[[NK:.+]] = aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::flashinfer_rotary_embedding.default">, positions = %[[BP]], query = %[[BQ]], key = %[[BK]], head_size = 16, cos_sin_cache = %[[BC]], is_neox = false)
// CHECK-NEXT: irfuse.yield %[[NQ]], %[[NK]]
// CHECK: func.return %[[QR]], %{{.+}}, %[[KR]]
func.func @v1_mla(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 112], bf16>, %arg2: !irfuse.tensor<[64, 16], f32>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 112], bf16>) -> !irfuse.tensor<[s77, 112], bf16>
  %split_with_sizes, %split_with_sizes_1 = aten.call tuple "aten::split_with_sizes.default"(%mul, [64, 48], -1) : (!irfuse.tensor<[s77, 112], bf16>) -> (!irfuse.tensor<[s77, 64], bf16>, !irfuse.tensor<[s77, 48], bf16>)
  %view = aten.call "aten::view.default"(%split_with_sizes, [-1, 2, 32]) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 2, 32], bf16>
  %split_with_sizes_2, %split_with_sizes_3 = aten.call tuple "aten::split_with_sizes.default"(%split_with_sizes_1, [32, 16], -1) : (!irfuse.tensor<[s77, 48], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split_with_sizes_3, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %slice = aten.call "aten::slice.Tensor"(%view, 2, 16, 9223372036854775807) : (!irfuse.tensor<[s77, 2, 32], bf16>) -> !irfuse.tensor<[s77, 2, 16], bf16>
  %auto_functionalized, %auto_functionalized_1, %auto_functionalized_2 = aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::flashinfer_rotary_embedding.default">, positions = %arg4, query = %slice, key = %unsqueeze, head_size = 16, cos_sin_cache = %arg2, is_neox = false) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[64, 16], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>)
  func.return %auto_functionalized_1, %split_with_sizes_2, %auto_functionalized_2 : !irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>
}

// A cache in the model dtype is not FlashInfer's (it refuses one): no attn.rope, the call stays
// (a remark in the report: "the cos_sin_cache is bf16, not the f32 cache its kernel reads").
// CHECK-LABEL: func.func @v2_bf16_cache
// CHECK-NOT: attn.rope
// CHECK: aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::flashinfer_rotary_embedding.default">
// CHECK-NOT: attn.rope
func.func @v2_bf16_cache(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 64], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::flashinfer_rotary_embedding.default">, positions = %arg4, head_size = 16, cos_sin_cache = %arg2, is_neox = true, _query_base_index = 0, _query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 32, _key_base_index = 0, _key_slice_dim = 1, _key_slice_start = 32, _key_slice_end = 48, _all_bases = [%mul]) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 64], bf16>)
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%split_with_sizes, 1) : (!irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
  %split_with_sizes_3, %split_with_sizes_4, %split_with_sizes_5 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_2 = aten.call "aten::mul.Tensor"(%split_with_sizes_4, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  %split_with_sizes_6, %split_with_sizes_7, %split_with_sizes_8 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_3 = aten.call "aten::mul.Tensor"(%split_with_sizes_8, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  func.return %mul_1, %mul_2, %mul_3 : !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>
}
