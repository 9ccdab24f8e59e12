// RUN: irfuse-opt %s -p raise-vllm-ops | filecheck %s

// ROCm's multimodal RoPE (`vllm.mrope`: [3, T] positions, interleaved sections [4, 2, 2]) on q
// and k viewed from one qkv buffer (auto_functionalized_v2): attn.rope on vLLM's own positions
// and cache, its sections as properties (no gather: the fused kernel picks each channel's row).
// The region keeps vLLM's call; the new qkv is rebuilt from the rope's results for the graph's
// readers. (CUDA's Triton MRoPE kernel raises on its gathered tables:
// tests/raising/test_user_kernels.py.)
// CHECK-NOT:  aten::index.Tensor
// CHECK:      attn.rope %{{.*}}, k %{{.*}}, positions %arg4, cos_sin_cache %arg2 {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64, mrope_section = array<i64: 4, 2, 2>, mrope_interleaved}
// CHECK:        aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::mrope.default">
// CHECK:        irfuse.yield
// CHECK:      aten.call "aten::slice_scatter.default"
// CHECK:      aten.call "aten::slice_scatter.default"
builtin.module attributes {irfuse.platform = "cpu"} {
  func.func @forward(%arg1: !irfuse.tensor<[s6, 128], bf16>, %arg2: !irfuse.tensor<[64, 16], bf16>, %arg3: !irfuse.sym<s50>, %arg4: !irfuse.tensor<[3, s50], i64>) -> (!irfuse.tensor<[s6, 64], bf16>, !irfuse.tensor<[s6, 32], bf16>, !irfuse.tensor<[s6, 32], bf16>) {
    %auto_functionalized_v2, %auto_functionalized_v2_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::mrope.default">, positions = %arg4, cos_sin_cache = %arg2, head_size = 16, rotary_dim = 16, mrope_section_t = 4, mrope_section_h = 2, mrope_section_w = 2, mrope_interleaved = true, is_neox_style = true, _query_base_index = 0, _query_slice_dim = 1, _query_slice_start = 0, _query_slice_end = 64, _key_base_index = 0, _key_slice_dim = 1, _key_slice_start = 64, _key_slice_end = 96, _all_bases = [%arg1]) : (!irfuse.tensor<[3, s50], i64>, !irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[s6, 128], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s6, 128], bf16>)
    %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%auto_functionalized_v2_1, [64, 32, 32], -1) : (!irfuse.tensor<[s6, 128], bf16>) -> (!irfuse.tensor<[s6, 64], bf16>, !irfuse.tensor<[s6, 32], bf16>, !irfuse.tensor<[s6, 32], bf16>)
    %mul = aten.call "aten::mul.Tensor"(%split_with_sizes, 1) : (!irfuse.tensor<[s6, 64], bf16>) -> !irfuse.tensor<[s6, 64], bf16>
    %mul_1 = aten.call "aten::mul.Tensor"(%split_with_sizes_1, 1) : (!irfuse.tensor<[s6, 32], bf16>) -> !irfuse.tensor<[s6, 32], bf16>
    %mul_2 = aten.call "aten::mul.Tensor"(%split_with_sizes_2, 1) : (!irfuse.tensor<[s6, 32], bf16>) -> !irfuse.tensor<[s6, 32], bf16>
    %copy_ = aten.call "aten::copy_.default"(%arg1, %auto_functionalized_v2_1) : (!irfuse.tensor<[s6, 128], bf16>, !irfuse.tensor<[s6, 128], bf16>) -> !irfuse.tensor<[s6, 128], bf16>
    func.return %mul, %mul_1, %mul_2 : !irfuse.tensor<[s6, 64], bf16>, !irfuse.tensor<[s6, 32], bf16>, !irfuse.tensor<[s6, 32], bf16>
  }
}

