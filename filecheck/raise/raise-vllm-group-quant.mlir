// RUN: irfuse-opt %s -p raise-vllm-ops | filecheck %s

// vLLM's CUDA group quant (`_C.per_token_group_fp8_quant`, as fp8_utils.per_token_group_quant_fp8
// calls it under auto_functionalized_v2) raises to `quant.fp8` with a group scheme: column-major
// scales (a [G, T] buffer the graph reads back through a permute) take the permute into the
// region; UE8M0 scales are a flag; the call stays in the decomposition region.
// CHECK-LABEL: func.func @forward
// CHECK:       %[[Q2:[^ ,]+]], %[[S2:[^ ,]+]] = quant.fp8 %{{.+}} {scheme = #quant.scheme<group 64, ue8m0>} : (!irfuse.tensor<[s77, 256], bf16>) -> (!irfuse.tensor<[s77, 256], f8E4M3FN>, scale_out !irfuse.tensor<[s77, 4], f32>) decomposition
// CHECK:       %[[Q1:[^ ,]+]], %[[S1:[^ ,]+]] = quant.fp8 %arg1 {scheme = #quant.scheme<group 128, col_major>} : (!irfuse.tensor<[s77, 256], bf16>) -> (!irfuse.tensor<[s77, 256], f8E4M3FN>, scale_out !irfuse.tensor<[s77, 2], f32>) decomposition
// CHECK:         aten.call "aten::permute.default"
// CHECK:       %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[S1]], 1)
// CHECK:       func.return %[[Q1]], %[[M]], %[[Q2]], %[[S2]]
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @forward(%arg0: !irfuse.sym<s77>, %arg1: !irfuse.tensor<[s77, 256], bf16>) -> (!irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 2], f32>, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 4], f32>) {
    %empty = aten.call "aten::empty.memory_format"([%arg0, 256], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s77>) -> !irfuse.tensor<[s77, 256], f8E4M3FN>
    %empty_1 = aten.call "aten::empty.memory_format"([2, %arg0], dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s77>) -> !irfuse.tensor<[2, s77], f32>
    %auto_functionalized_v2, %auto_functionalized_v2_1, %auto_functionalized_v2_2 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::per_token_group_fp8_quant.default">, input = %arg1, group_size = 128, eps = 1.0e-10, fp8_min = -448.0, fp8_max = 448.0, scale_ue8m0 = false, dummy_is_scale_transposed = true, dummy_is_tma_aligned = false, _output_q_base_index = 0, _output_s_base_index = 1, _output_s_size = (%arg0, 2), _output_s_stride = (1, %arg0), _output_s_storage_offset = 0, _all_bases = [%empty, %empty_1]) : (!irfuse.tensor<[s77, 256], bf16>, !irfuse.sym<s77>, !irfuse.sym<s77>, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[2, s77], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[2, s77], f32>)
    %mul = aten.call "aten::mul.Tensor"(%arg1, 2) : (!irfuse.tensor<[s77, 256], bf16>) -> !irfuse.tensor<[s77, 256], bf16>
    %empty_2 = aten.call "aten::empty.memory_format"([%arg0, 256], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s77>) -> !irfuse.tensor<[s77, 256], f8E4M3FN>
    %empty_3 = aten.call "aten::empty.memory_format"([%arg0, 4], dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s77>) -> !irfuse.tensor<[s77, 4], f32>
    %auto_functionalized_v2_3, %auto_functionalized_v2_4, %auto_functionalized_v2_5 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"_C::per_token_group_fp8_quant.default">, input = %mul, group_size = 64, eps = 1.0e-10, fp8_min = -448.0, fp8_max = 448.0, scale_ue8m0 = true, dummy_is_scale_transposed = false, dummy_is_tma_aligned = false, _output_q_base_index = 0, _output_s_base_index = 1, _all_bases = [%empty_2, %empty_3]) : (!irfuse.tensor<[s77, 256], bf16>, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 4], f32>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 4], f32>)
    %permute = aten.call "aten::permute.default"(%auto_functionalized_v2_2, [-1, -2]) : (!irfuse.tensor<[2, s77], f32>) -> !irfuse.tensor<[s77, 2], f32>
    %mul_1 = aten.call "aten::mul.Tensor"(%permute, 1) : (!irfuse.tensor<[s77, 2], f32>) -> !irfuse.tensor<[s77, 2], f32>
    func.return %auto_functionalized_v2_1, %mul_1, %auto_functionalized_v2_4, %auto_functionalized_v2_5 : !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 2], f32>, !irfuse.tensor<[s77, 256], f8E4M3FN>, !irfuse.tensor<[s77, 4], f32>
  }
}
