// RUN: irfuse-opt %s -p raise-vllm-ops | filecheck %s

// Trimmed from real dumps (torch 2.13, tests/vllm_ops.py stand-ins for vLLM's `_C` ops), the
// calls as vLLM's layers make them with custom ops on.

// auto_functionalized_v2 (torch's default): mutable arguments are `_<name>_base_index` into
// `_all_bases`, the results the new bases. The output buffers made for the call alone move in.
// CHECK-LABEL: func.func @v2
// CHECK-SAME: (%[[W:.+]]: !irfuse.tensor<[64], bf16>, %[[T:.+]]: !irfuse.sym<s33>, %[[X:.+]]: !irfuse.tensor<[s33, 64], bf16>, %[[S:.+]]: !irfuse.tensor<[1], f32>)
// CHECK-NEXT: %[[Y:.+]] = norm.rms_norm %[[X]], weight %[[W]] {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s33, 64], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[BX:.+]]: !irfuse.tensor<[s33, 64], bf16>, %[[BW:.+]]: !irfuse.tensor<[64], bf16>):
// CHECK-NEXT: %[[BUF:.+]] = aten.call "aten::empty_like.default"(%[[BX]], pin_memory = false)
// CHECK-NEXT: %{{.+}}, %[[OUT:.+]] = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rms_norm.default">, input = %[[BX]], weight = %[[BW]], epsilon = 1.0e-06, _result_base_index = 0, _all_bases = [%[[BUF]]])
// CHECK-NEXT: irfuse.yield %[[OUT]]
// CHECK: %[[Q:.+]] = quant.fp8 %[[Y]], scale %[[S]] {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s33, 64], f8E4M3FN> decomposition {
// CHECK: %[[H:.+]], %[[R:.+]] = norm.add_rms_norm %{{.+}}, %[[Y]], weight %[[W]] {eps = 1.000000e-05 : f64, round_sum} : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], bf16>)
// CHECK: %[[Q2:.+]], %[[S2:.+]] = quant.fp8 %[[H]], scale_ub %[[S]] {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s33, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s33, 1], f32>)
// CHECK: %[[Q3:.+]], %[[S3:.+]] = quant.fp8 %[[H]] {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s33, 64], bf16>) -> (!irfuse.tensor<[s33, 64], f8E4M3FN>, scale_out !irfuse.tensor<[1], f32>)
// CHECK: aten.call "aten::zeros.default"([1]
// CHECK: %[[A:.+]] = act.silu_mul %[[R]] : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 32], bf16>
// CHECK: func.return %[[Q]], %[[Q2]], %[[S2]], %[[Q3]], %[[S3]], %[[A]]
func.func @v2(%arg0: !irfuse.tensor<[64], bf16>, %arg1: !irfuse.sym<s33>, %arg2: !irfuse.tensor<[s33, 64], bf16>, %arg3: !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 1], f32>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s33, 32], bf16>) {
  %empty_like = aten.call "aten::empty_like.default"(%arg2, pin_memory = false) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 64], bf16>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rms_norm.default">, input = %arg2, weight = %arg0, epsilon = 1.0e-06, _result_base_index = 0, _all_bases = [%empty_like]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[s33, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], bf16>)
  %empty = aten.call "aten::empty.memory_format"([%arg1, 64], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 64], f8E4M3FN>
  %af_2, %af_3 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::static_scaled_fp8_quant.default">, input = %af_1, scale = %arg3, group_shape = none, _result_base_index = 0, _all_bases = [%empty]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s33, 64], f8E4M3FN>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], f8E4M3FN>)
  %mul = aten.call "aten::mul.Tensor"(%arg2, 2) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 64], bf16>
  %af_4, %af_5, %af_6 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::fused_add_rms_norm.default">, weight = %arg0, epsilon = 1.0e-05, _input_base_index = 0, _residual_base_index = 1, _all_bases = [%mul, %af_1]) : (!irfuse.tensor<[64], bf16>, !irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], bf16>)
  %empty_1 = aten.call "aten::empty.memory_format"([%arg1, 64], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 64], f8E4M3FN>
  %empty_2 = aten.call "aten::empty.memory_format"([%arg1, 1], dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 1], f32>
  %af_7, %af_8, %af_9 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::dynamic_per_token_scaled_fp8_quant.default">, input = %af_5, scale_ub = %arg3, _result_base_index = 0, _scale_base_index = 1, _all_bases = [%empty_1, %empty_2]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 1], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 1], f32>)
  %empty_3 = aten.call "aten::empty.memory_format"([%arg1, 64], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 64], f8E4M3FN>
  %zeros = aten.call "aten::zeros.default"([1], dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[1], f32>
  %af_10, %af_11, %af_12 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::dynamic_scaled_fp8_quant.default">, input = %af_5, _result_base_index = 0, _scale_base_index = 1, _all_bases = [%empty_3, %zeros]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>)
  %empty_4 = aten.call "aten::empty.memory_format"([%arg1, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  %af_13, %af_14 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::silu_and_mul.default">, input = %af_6, _result_base_index = 0, _all_bases = [%empty_4]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], bf16>)
  func.return %af_3, %af_8, %af_9, %af_11, %af_12, %af_14 : !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[s33, 1], f32>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s33, 32], bf16>
}

// auto_functionalized (v1): every argument by name; the results are the new values of the
// mutable ones in schema order. RoPE on head-split q and k, with the cache indexed by positions.
// CHECK-LABEL: func.func @v1
// CHECK: %[[Y:.+]] = norm.rms_norm %{{.+}}, weight %{{.+}} {eps = 1.000000e-06 : f64}
// CHECK: aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rms_norm.default">, result = %{{.+}}, input =
// CHECK: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[Q:.+]], k %[[K:.+]], positions %[[P:.+]], cos_sin_cache %[[C:.+]] {is_neox = true, rotary_dim = 8 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s33, 2, 16], bf16>, !irfuse.tensor<[s33, 1, 16], bf16>, !irfuse.tensor<[8], i64>, !irfuse.tensor<[64, 8], bf16>) -> (!irfuse.tensor<[s33, 2, 16], bf16>, k_out !irfuse.tensor<[s33, 1, 16], bf16>)
// CHECK: func.return %[[Y]], %[[QR]], %[[KR]]
func.func @v1(%arg0: !irfuse.tensor<[64], bf16>, %arg1: !irfuse.sym<s33>, %arg2: !irfuse.tensor<[s33, 64], bf16>, %arg4: !irfuse.tensor<[64, 8], bf16>, %arg5: !irfuse.tensor<[8], i64>) -> (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 2, 16], bf16>, !irfuse.tensor<[s33, 1, 16], bf16>) {
  %empty_like = aten.call "aten::empty_like.default"(%arg2, pin_memory = false) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 64], bf16>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rms_norm.default">, result = %empty_like, input = %arg2, weight = %arg0, epsilon = 1.0e-06) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%af_1, 3) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 64], bf16>
  %slice_1 = aten.call "aten::slice.Tensor"(%mul_1, 1, 0, 32) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 32], bf16>
  %view_1 = aten.call "aten::view.default"(%slice_1, [%arg1, 2, 16]) : (!irfuse.tensor<[s33, 32], bf16>, !irfuse.sym<s33>) -> !irfuse.tensor<[s33, 2, 16], bf16>
  %slice_3 = aten.call "aten::slice.Tensor"(%mul_1, 1, 32, 48) : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 16], bf16>
  %view_2 = aten.call "aten::view.default"(%slice_3, [%arg1, 1, 16]) : (!irfuse.tensor<[s33, 16], bf16>, !irfuse.sym<s33>) -> !irfuse.tensor<[s33, 1, 16], bf16>
  %af_17, %af_18, %af_19 = aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rotary_embedding.default">, positions = %arg5, query = %view_1, key = %view_2, head_size = 16, cos_sin_cache = %arg4, is_neox = true) : (!irfuse.tensor<[8], i64>, !irfuse.tensor<[s33, 2, 16], bf16>, !irfuse.tensor<[s33, 1, 16], bf16>, !irfuse.tensor<[64, 8], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 2, 16], bf16>, !irfuse.tensor<[s33, 1, 16], bf16>)
  func.return %af_1, %af_18, %af_19 : !irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 2, 16], bf16>, !irfuse.tensor<[s33, 1, 16], bf16>
}

// vLLM's attention: `q, k, v = qkv.split(...)`, then rotary_embedding in place on the flat q and
// k. v2 passes them as slices of the one qkv base (`_query_slice_*`) and returns the new base.
// Raised to attn.rope on `[T, heads, head_size]` views (built before it); the region keeps the
// call and yields the same views of its new base; the new base is rebuilt after the raised op
// by scattering the rotated q and k into the old one (v untouched), for the split that reads it.
// CHECK-LABEL: func.func @v2_flat
// CHECK: %[[MUL:.+]] = aten.call "aten::mul.Tensor"
// CHECK-NEXT: %[[QS:.+]] = aten.call "aten::slice.Tensor"(%[[MUL]], 1, 0, 32)
// CHECK-NEXT: %[[Q:.+]] = aten.call "aten::unflatten.int"(%[[QS]], 1, [2, 16]) : (!irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 2, 16], bf16>
// CHECK-NEXT: %[[KS:.+]] = aten.call "aten::slice.Tensor"(%[[MUL]], 1, 32, 48)
// CHECK-NEXT: %[[K:.+]] = aten.call "aten::unflatten.int"(%[[KS]], 1, [1, 16])
// CHECK-NEXT: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[Q]], k %[[K]], positions %arg4, cos_sin_cache %arg2 {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.tensor<[s77, 2, 16], bf16>, k_out !irfuse.tensor<[s77, 1, 16], bf16>) decomposition {
// CHECK-NEXT: ^{{.*}}(
// CHECK-NEXT: %{{.+}}, %[[NB:.+]] = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rotary_embedding.default">, {{.*}}_query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 32, {{.*}}_all_bases = [%[[MUL]]])
// CHECK-NEXT: %[[NQS:.+]] = aten.call "aten::slice.Tensor"(%[[NB]], 1, 0, 32)
// CHECK-NEXT: %[[NQ:.+]] = aten.call "aten::unflatten.int"(%[[NQS]], 1, [2, 16])
// CHECK-NEXT: %[[NKS:.+]] = aten.call "aten::slice.Tensor"(%[[NB]], 1, 32, 48)
// CHECK-NEXT: %[[NK:.+]] = aten.call "aten::unflatten.int"(%[[NKS]], 1, [1, 16])
// CHECK-NEXT: irfuse.yield %[[NQ]], %[[NK]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[QF:.+]] = aten.call "aten::flatten.using_ints"(%[[QR]], 1, 2) : (!irfuse.tensor<[s77, 2, 16], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
// CHECK-NEXT: %[[B1:.+]] = aten.call "aten::slice_scatter.default"(%[[MUL]], %[[QF]], 1, 0, 32)
// CHECK-NEXT: %[[KF:.+]] = aten.call "aten::flatten.using_ints"(%[[KR]], 1, 2)
// CHECK-NEXT: %[[B2:.+]] = aten.call "aten::slice_scatter.default"(%[[B1]], %[[KF]], 1, 32, 48)
// CHECK-NEXT: aten.call tuple "aten::split_with_sizes.default"(%[[B2]], [32, 16, 16], -1)
func.func @v2_flat(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 64], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rotary_embedding.default">, positions = %arg4, head_size = 16, cos_sin_cache = %arg2, is_neox = true, _query_base_index = 0, _query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 32, _key_base_index = 0, _key_slice_dim = 1, _key_slice_start = 32, _key_slice_end = 48, _all_bases = [%mul]) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 64], bf16>)
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%split_with_sizes, 1) : (!irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
  %mul_2 = aten.call "aten::mul.Tensor"(%split_with_sizes_1, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  %mul_3 = aten.call "aten::mul.Tensor"(%split_with_sizes_2, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  func.return %mul_1, %mul_2, %mul_3 : !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>
}
// q and k viewed as heads before the call: v2 records as_strided views of the qkv base; the
// raised op reads the same as_strided views, the new base is rebuilt by as_strided_scatter.
// CHECK-LABEL: func.func @v2_heads
// CHECK: %[[MUL:.+]] = aten.call "aten::mul.Tensor"
// CHECK-NEXT: %[[Q:.+]] = aten.call "aten::as_strided.default"(%[[MUL]], [%arg0, 2, 16], [64, 16, 1], 0)
// CHECK-NEXT: %[[K:.+]] = aten.call "aten::as_strided.default"(%[[MUL]], [%arg0, 1, 16], [64, 16, 1], 32)
// CHECK-NEXT: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[Q]], k %[[K]], positions %arg4, cos_sin_cache %arg2
// CHECK: %{{.+}}, %[[NB:.+]] = aten.call tuple "hop:auto_functionalized_v2"
// CHECK-NEXT: %[[NQ:.+]] = aten.call "aten::as_strided.default"(%[[NB]], [%arg0, 2, 16], [64, 16, 1], 0)
// CHECK-NEXT: %[[NK:.+]] = aten.call "aten::as_strided.default"(%[[NB]], [%arg0, 1, 16], [64, 16, 1], 32)
// CHECK-NEXT: irfuse.yield %[[NQ]], %[[NK]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[B1:.+]] = aten.call "aten::as_strided_scatter.default"(%[[MUL]], %[[QR]], [%arg0, 2, 16], [64, 16, 1], 0)
// CHECK-NEXT: %[[B2:.+]] = aten.call "aten::as_strided_scatter.default"(%[[B1]], %[[KR]], [%arg0, 1, 16], [64, 16, 1], 32)
// CHECK-NEXT: aten.call tuple "aten::split_with_sizes.default"(%[[B2]], [32, 16, 16], -1)
func.func @v2_heads(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 64], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rotary_embedding.default">, positions = %arg4, head_size = 16, cos_sin_cache = %arg2, is_neox = true, _query_base_index = 0, _query_size = (%arg0, 2, 16), _query_stride = (64, 16, 1), _query_storage_offset = 0, _key_base_index = 0, _key_size = (%arg0, 1, 16), _key_stride = (64, 16, 1), _key_storage_offset = 32, _all_bases = [%mul]) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], bf16>, !irfuse.sym<s77>, !irfuse.sym<s77>, !irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 64], bf16>)
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %view = aten.call "aten::view.default"(%split_with_sizes, [%arg0, 2, 16]) : (!irfuse.tensor<[s77, 32], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 2, 16], bf16>
  %mul_1 = aten.call "aten::mul.Tensor"(%view, 1) : (!irfuse.tensor<[s77, 2, 16], bf16>) -> !irfuse.tensor<[s77, 2, 16], bf16>
  %view_1 = aten.call "aten::view.default"(%split_with_sizes_1, [%arg0, 1, 16]) : (!irfuse.tensor<[s77, 16], bf16>, !irfuse.sym<s77>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %mul_2 = aten.call "aten::mul.Tensor"(%view_1, 1) : (!irfuse.tensor<[s77, 1, 16], bf16>) -> !irfuse.tensor<[s77, 1, 16], bf16>
  %mul_3 = aten.call "aten::mul.Tensor"(%split_with_sizes_2, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  func.return %mul_1, %mul_2, %mul_3 : !irfuse.tensor<[s77, 2, 16], bf16>, !irfuse.tensor<[s77, 1, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>
}
// v1 passes the flat split pieces themselves; the new q and k (results 1 and 2) are rebuilt
// flat from the raised op's head-split results, for the slice_scatters that read them.
// CHECK-LABEL: func.func @v1_flat
// CHECK: %[[QS:.+]], %[[KS:.+]], %{{.+}} = aten.call tuple "aten::split_with_sizes.default"
// CHECK-NEXT: %[[Q:.+]] = aten.call "aten::unflatten.int"(%[[QS]], 1, [2, 16])
// CHECK-NEXT: %[[K:.+]] = aten.call "aten::unflatten.int"(%[[KS]], 1, [1, 16])
// CHECK-NEXT: %[[QR:.+]], %[[KR:.+]] = attn.rope %[[Q]], k %[[K]], positions %arg4, cos_sin_cache %arg2
// CHECK: %{{.+}}, %[[NQ:.+]], %[[NK:.+]] = aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rotary_embedding.default">, positions = %{{.+}}, query = %[[QS]], key = %[[KS]],
// CHECK-NEXT: %[[NQH:.+]] = aten.call "aten::unflatten.int"(%[[NQ]], 1, [2, 16])
// CHECK-NEXT: %[[NKH:.+]] = aten.call "aten::unflatten.int"(%[[NK]], 1, [1, 16])
// CHECK-NEXT: irfuse.yield %[[NQH]], %[[NKH]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[QF:.+]] = aten.call "aten::flatten.using_ints"(%[[QR]], 1, 2)
// CHECK-NEXT: %[[KF:.+]] = aten.call "aten::flatten.using_ints"(%[[KR]], 1, 2)
// CHECK-NEXT: %[[S1:.+]] = aten.call "aten::slice_scatter.default"(%{{.+}}, %[[QF]], 1, 0, 32)
// CHECK-NEXT: aten.call "aten::slice_scatter.default"(%[[S1]], %[[KF]], 1, 32, 48)
func.func @v1_flat(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 64], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>) {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 64], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%mul, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %auto_functionalized, %auto_functionalized_1, %auto_functionalized_2 = aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rotary_embedding.default">, positions = %arg4, query = %split_with_sizes, key = %split_with_sizes_1, head_size = 16, cos_sin_cache = %arg2, is_neox = true) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[64, 16], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %slice_scatter = aten.call "aten::slice_scatter.default"(%mul, %auto_functionalized_1, 1, 0, 32) : (!irfuse.tensor<[s77, 64], bf16>, !irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %slice_scatter_1 = aten.call "aten::slice_scatter.default"(%slice_scatter, %auto_functionalized_2, 1, 32, 48) : (!irfuse.tensor<[s77, 64], bf16>, !irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 64], bf16>
  %split_with_sizes_3, %split_with_sizes_4, %split_with_sizes_5 = aten.call tuple "aten::split_with_sizes.default"(%slice_scatter_1, [32, 16, 16], -1) : (!irfuse.tensor<[s77, 64], bf16>) -> (!irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%split_with_sizes_3, 1) : (!irfuse.tensor<[s77, 32], bf16>) -> !irfuse.tensor<[s77, 32], bf16>
  %mul_2 = aten.call "aten::mul.Tensor"(%split_with_sizes_4, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  %mul_3 = aten.call "aten::mul.Tensor"(%split_with_sizes_5, 1) : (!irfuse.tensor<[s77, 16], bf16>) -> !irfuse.tensor<[s77, 16], bf16>
  func.return %mul_1, %mul_2, %mul_3 : !irfuse.tensor<[s77, 32], bf16>, !irfuse.tensor<[s77, 16], bf16>, !irfuse.tensor<[s77, 16], bf16>
}
// Not raised: q and k overlap in their base (v2 rotates q, then k in the same buffer: k reads
// rotated values of q, which no rope of the two views computes).
// CHECK-LABEL: func.func @overlap
// CHECK-NOT: attn.rope
// CHECK: aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rotary_embedding.default">
func.func @overlap(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 48], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s80>, %arg4: !irfuse.tensor<[s80], i64>) -> !irfuse.tensor<[s77, 48], bf16> {
  %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 48], bf16>) -> !irfuse.tensor<[s77, 48], bf16>
  %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::rotary_embedding.default">, positions = %arg4, head_size = 16, cos_sin_cache = %arg2, is_neox = true, _query_base_index = 0, _query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 32, _key_base_index = 0, _key_slice_dim = 1, _key_slice_start = 16, _key_slice_end = 48, _all_bases = [%mul]) : (!irfuse.tensor<[s80], i64>, !irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[s77, 48], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 48], bf16>)
  %mul_1 = aten.call "aten::mul.Tensor"(%auto_functionalized_v2_1, 1) : (!irfuse.tensor<[s77, 48], bf16>) -> !irfuse.tensor<[s77, 48], bf16>
  func.return %mul_1 : !irfuse.tensor<[s77, 48], bf16>
}

// Not raised: a static quant whose scale is computed in the graph; an op this pass does not
// know.
// CHECK-LABEL: func.func @negative
// CHECK-NOT: quant.fp8
// CHECK-NOT: act.
// CHECK: func.return
func.func @negative(%arg1: !irfuse.sym<s33>, %a: !irfuse.tensor<[s33, 32], bf16>, %h: !irfuse.tensor<[s33, 64], bf16>) -> (!irfuse.tensor<[s33, 32], f8E4M3FN>, !irfuse.tensor<[s33, 32], bf16>) {
  %_to_copy = aten.call "aten::_to_copy.default"(%a, dtype = f32) : (!irfuse.tensor<[s33, 32], bf16>) -> !irfuse.tensor<[s33, 32], f32>
  %abs = aten.call "aten::abs.default"(%_to_copy) : (!irfuse.tensor<[s33, 32], f32>) -> !irfuse.tensor<[s33, 32], f32>
  %amax = aten.call "aten::amax.default"(%abs) : (!irfuse.tensor<[s33, 32], f32>) -> !irfuse.tensor<[], f32>
  %view = aten.call "aten::view.default"(%amax, [1]) : (!irfuse.tensor<[], f32>) -> !irfuse.tensor<[1], f32>
  %empty_5 = aten.call "aten::empty.memory_format"([%arg1, 32], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], f8E4M3FN>
  %af_15, %af_16 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::static_scaled_fp8_quant.default">, input = %a, scale = %view, group_shape = none, _result_base_index = 0, _all_bases = [%empty_5]) : (!irfuse.tensor<[s33, 32], bf16>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s33, 32], f8E4M3FN>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], f8E4M3FN>)
  %empty_4 = aten.call "aten::empty.memory_format"([%arg1, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  %af_20, %af_21 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::mul_and_silu.default">, input = %h, _out_base_index = 0, _all_bases = [%empty_4]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], bf16>)
  func.return %af_16, %af_21 : !irfuse.tensor<[s33, 32], f8E4M3FN>, !irfuse.tensor<[s33, 32], bf16>
}

// GeGLU: vLLM's gelu_and_mul / gelu_tanh_and_mul (their output argument is `out`) raise to the
// gated activation with activation gelu / gelu_tanh, the fresh output buffer in the region.
// CHECK-LABEL: func.func @gelu_and_mul
// CHECK: %[[G:[^ ]+]] = act.silu_mul %{{[^ ]+}} {activation = "gelu"} : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 32], bf16> decomposition
// CHECK: "_C::gelu_and_mul.default"
// CHECK: %[[T:[^ ]+]] = act.silu_mul %{{[^ ]+}} {activation = "gelu_tanh"} : (!irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 32], bf16> decomposition
// CHECK: "_C::gelu_tanh_and_mul.default"
// CHECK: func.return %[[G]], %[[T]]
func.func @gelu_and_mul(%arg1: !irfuse.sym<s33>, %h: !irfuse.tensor<[s33, 64], bf16>) -> (!irfuse.tensor<[s33, 32], bf16>, !irfuse.tensor<[s33, 32], bf16>) {
  %e1 = aten.call "aten::empty.memory_format"([%arg1, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  %a1, %g = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::gelu_and_mul.default">, input = %h, _out_base_index = 0, _all_bases = [%e1]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], bf16>)
  %e2 = aten.call "aten::empty.memory_format"([%arg1, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  %a2, %t = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::gelu_tanh_and_mul.default">, input = %h, _out_base_index = 0, _all_bases = [%e2]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], bf16>)
  func.return %g, %t : !irfuse.tensor<[s33, 32], bf16>, !irfuse.tensor<[s33, 32], bf16>
}

// vLLM IR's functional norms (compilation_config.ir_enable_torch_wrap): the whole call in the
// region; a weight in another dtype than x (vLLM IR multiplies in the weight's) is left alone.
// CHECK-LABEL: func.func @vllm_ir
// CHECK: %[[N:.+]] = norm.rms_norm %[[X:.+]] {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 64], bf16> decomposition {
// CHECK-NEXT: ^{{.+}}(%[[BX:.+]]: !irfuse.tensor<[s30, 64], bf16>):
// CHECK-NEXT: %[[R:.+]] = aten.call "vllm_ir::rms_norm.default"(%[[BX]], none, 1.0e-06)
// CHECK-NEXT: irfuse.yield %[[R]]
// CHECK: %[[Y:.+]], %[[RES:.+]] = norm.add_rms_norm %[[N]], %[[X]], weight %[[W:.+]] {eps = 1.000000e-05 : f64} : (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>) decomposition {
// CHECK: aten.call tuple "vllm_ir::fused_add_rms_norm.default"
// CHECK: %[[F:.+]] = aten.call "vllm_ir::rms_norm.default"(%[[Y]], %{{.+}}, 1.0e-06) : (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[64], f32>)
// CHECK: func.return %[[Y]], %[[RES]], %[[F]]
func.func @vllm_ir(%x: !irfuse.tensor<[s30, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %w32: !irfuse.tensor<[64], f32>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>) {
  %rms_norm = aten.call "vllm_ir::rms_norm.default"(%x, none, 1.0e-06) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 64], bf16>
  %y, %r = aten.call tuple "vllm_ir::fused_add_rms_norm.default"(%rms_norm, %x, %w, 1.0e-05) : (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>)
  %f = aten.call "vllm_ir::rms_norm.default"(%y, %w32, 1.0e-06) : (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s30, 64], bf16>
  func.return %y, %r, %f : !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 64], bf16>
}

// vLLM's FP8 linear on CUDA (`ops.cutlass_scaled_mm`, after a dynamic per-tensor quant): a
// gemm.scaled_matmul, the channel-wise weight scale `[N, 1]` (as vLLM stores it, read flat by
// CUTLASS) viewed as `[1, N]`; the call stays in the region, on the scale as it was.
// CHECK-LABEL: func.func @cutlass_scaled_mm
// CHECK-SAME: (%[[W:.+]]: !irfuse.tensor<[32, 64], f8E4M3FN>, %[[WS:.+]]: !irfuse.tensor<[32, 1], f32>, %{{.+}}: !irfuse.sym<s33>, %[[X:.+]]: !irfuse.tensor<[s33, 64], bf16>)
// CHECK: %[[Q:.+]], %[[S:.+]] = quant.fp8 %[[X]] {scheme = #quant.scheme<dynamic_tensor>}
// CHECK: %[[T:.+]] = aten.call "aten::t.default"(%[[W]])
// CHECK: %[[A:.+]] = aten.call "aten::view.default"(%[[Q]], [-1, 64])
// CHECK-NEXT: %[[ROW:.+]] = aten.call "aten::view.default"(%[[WS]], [1, 32]) : (!irfuse.tensor<[32, 1], f32>) -> !irfuse.tensor<[1, 32], f32>
// CHECK-NEXT: %[[Y:.+]] = gemm.scaled_matmul %[[A]], %[[T]], %[[S]], %[[ROW]] {out_dtype = bf16} : (!irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1, 32], f32>) -> !irfuse.tensor<[s33, 32], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[BA:.+]]: !irfuse.tensor<[s33, 64], f8E4M3FN>, %[[BT:.+]]: !irfuse.tensor<[64, 32], f8E4M3FN>, %[[BS:.+]]: !irfuse.tensor<[1], f32>, %{{.+}}: !irfuse.tensor<[1, 32], f32>):
// CHECK-NEXT: %[[BUF:.+]] = aten.call "aten::empty.memory_format"
// CHECK-NEXT: %{{.+}}, %[[OUT:.+]] = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::cutlass_scaled_mm.default">, a = %[[BA]], b = %[[BT]], a_scales = %[[BS]], b_scales = %[[WS]], bias = none, _out_base_index = 0, _all_bases = [%[[BUF]]])
// CHECK-NEXT: irfuse.yield %[[OUT]]
// CHECK: aten.call "aten::view.default"(%[[Y]]
func.func @cutlass_scaled_mm(%arg0: !irfuse.tensor<[32, 64], f8E4M3FN>, %arg1: !irfuse.tensor<[32, 1], f32>, %arg2: !irfuse.sym<s33>, %arg3: !irfuse.tensor<[s33, 64], bf16>) -> !irfuse.tensor<[s33, 32], bf16> {
  %empty = aten.call "aten::empty.memory_format"([%arg2, 64], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 64], f8E4M3FN>
  %zeros = aten.call "aten::zeros.default"([1], dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[1], f32>
  %af, %af_1, %af_2 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::dynamic_scaled_fp8_quant.default">, input = %arg3, _result_base_index = 0, _scale_base_index = 1, _all_bases = [%empty, %zeros]) : (!irfuse.tensor<[s33, 64], bf16>, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>)
  %t = aten.call "aten::t.default"(%arg0) : (!irfuse.tensor<[32, 64], f8E4M3FN>) -> !irfuse.tensor<[64, 32], f8E4M3FN>
  %empty_1 = aten.call "aten::empty.memory_format"([%arg2, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  %view = aten.call "aten::view.default"(%af_1, [-1, 64]) : (!irfuse.tensor<[s33, 64], f8E4M3FN>) -> !irfuse.tensor<[s33, 64], f8E4M3FN>
  %af_3, %af_4 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::cutlass_scaled_mm.default">, a = %view, b = %t, a_scales = %af_2, b_scales = %arg1, bias = none, _out_base_index = 0, _all_bases = [%empty_1]) : (!irfuse.tensor<[s33, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[32, 1], f32>, !irfuse.tensor<[s33, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s33, 32], bf16>)
  %view_1 = aten.call "aten::view.default"(%af_4, [%arg2, 32]) : (!irfuse.tensor<[s33, 32], bf16>, !irfuse.sym<s33>) -> !irfuse.tensor<[s33, 32], bf16>
  func.return %view_1 : !irfuse.tensor<[s33, 32], bf16>
}
