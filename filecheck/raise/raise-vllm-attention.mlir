// RUN: irfuse-opt %s -p raise-vllm-attention | filecheck %s

// Trimmed from real dumps (torch 2.13, tests/vllm_attention.py stand-ins for vLLM 0.32's ops, the
// calls as its Attention.forward makes them), and the hoisted-LayerName form of vLLM on torch 2.13.

// auto_functionalized_v2: the output is a fresh [T, H * D] buffer viewed [T, H, D]; the raised op
// yields the view of the new base, and the graph's reads of the base read its flattening.
// CHECK-LABEL: func.func @v2
// CHECK: %[[Q:.+]] = aten.call "aten::view.default"(%{{.+}}, [-1, 4, 16])
// CHECK-NEXT: %[[K:.+]] = aten.call "aten::view.default"(%{{.+}}, [-1, 2, 16])
// CHECK-NEXT: %[[V:.+]] = aten.call "aten::view.default"(%{{.+}}, [-1, 2, 16])
// CHECK-NEXT: %[[DEP:.+]] = attn.vllm_kv_cache_update %[[K]], %[[V]] {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>) -> !irfuse.tensor<[0], bf16> decomposition {
// CHECK-NEXT: ^{{.+}}(%[[BK:.+]]: !irfuse.tensor<[s30, 2, 16], bf16>, %[[BV:.+]]: !irfuse.tensor<[s30, 2, 16], bf16>):
// CHECK-NEXT: %[[D:.+]] = aten.call "vllm::unified_kv_cache_update.default"(%[[BK]], %[[BV]], "model.layers.0.self_attn.attn")
// CHECK-NEXT: irfuse.yield %[[D]]
// CHECK: %[[O:.+]] = attn.vllm_attention %[[Q]], %[[K]], %[[V]], kv_cache_dep %[[DEP]] {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16> decomposition {
// CHECK-NEXT: ^{{.+}}(
// CHECK-NEXT: %[[BUF:.+]] = aten.call "aten::empty.memory_format"
// CHECK-NEXT: %{{.+}}, %[[NEW:.+]] = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_attention_with_output.default">
// CHECK-SAME: _all_bases = [%[[BUF]]])
// CHECK-NEXT: %[[Y:.+]] = aten.call "aten::as_strided.default"(%[[NEW]], [%{{.+}}, 4, 16], [64, 16, 1], 0)
// CHECK-NEXT: irfuse.yield %[[Y]]
// CHECK: %[[FLAT:.+]] = aten.call "aten::flatten.using_ints"(%[[O]], 1, 2) : (!irfuse.tensor<[s30, 4, 16], bf16>) -> !irfuse.tensor<[s30, 64], bf16>
// CHECK-NEXT: aten.call "aten::view.default"(%[[FLAT]], [-1, 4, 16])
func.func @v2(%arg0: !irfuse.sym<s30>, %arg1: !irfuse.tensor<[s30, 128], bf16>) -> !irfuse.tensor<[s30, 64], bf16> {
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%arg1, [64, 32, 32], -1) : (!irfuse.tensor<[s30, 128], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>)
  %empty = aten.call "aten::empty.memory_format"([%arg0, 64], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 64], bf16>
  %view = aten.call "aten::view.default"(%split_with_sizes, [-1, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %view_1 = aten.call "aten::view.default"(%split_with_sizes_1, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %view_2 = aten.call "aten::view.default"(%split_with_sizes_2, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %unified_kv_cache_update = aten.call "vllm::unified_kv_cache_update.default"(%view_1, %view_2, "model.layers.0.self_attn.attn") : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>) -> !irfuse.tensor<[0], bf16>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_attention_with_output.default">, query = %view, key = %view_1, value = %view_2, layer_name = "model.layers.0.self_attn.attn", output_scale = none, kv_cache_dummy_dep = %unified_kv_cache_update, _output_base_index = 0, _output_size = (%arg0, 4, 16), _output_stride = (64, 16, 1), _output_storage_offset = 0, _output_block_scale_base_index = none, _all_bases = [%empty]) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.sym<s30>, !irfuse.tensor<[s30, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 64], bf16>)
  %view_3 = aten.call "aten::view.default"(%af_1, [-1, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %view_4 = aten.call "aten::view.default"(%view_3, [-1, 64]) : (!irfuse.tensor<[s30, 4, 16], bf16>) -> !irfuse.tensor<[s30, 64], bf16>
  func.return %view_4 : !irfuse.tensor<[s30, 64], bf16>
}

// vLLM on torch 2.13 hoists the layer name (its LayerName) to a graph input; import types it
// opaque and marks the argument with the name it was traced with. The raised ops keep both.
// CHECK-LABEL: func.func @hoisted
// CHECK: %[[DEP:.+]] = attn.vllm_kv_cache_update %{{.+}}, %{{.+}}, layer %[[LN:.+]] {layer_name = "model.layers.3.self_attn.attn"} : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
// CHECK: attn.vllm_attention %{{.+}}, %{{.+}}, %{{.+}}, kv_cache_dep %[[DEP]], layer %[[LN]] {layer_name = "model.layers.3.self_attn.attn"}
func.func @hoisted(%arg0: !irfuse.sym<s30>, %arg1: !irfuse.tensor<[s30, 128], bf16>, %ln: !irfuse.opaque<"LayerName"> {irfuse.layer_name = "model.layers.3.self_attn.attn"}) -> !irfuse.tensor<[s30, 64], bf16> {
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%arg1, [64, 32, 32], -1) : (!irfuse.tensor<[s30, 128], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>)
  %empty = aten.call "aten::empty.memory_format"([%arg0, 64], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 64], bf16>
  %view = aten.call "aten::view.default"(%split_with_sizes, [-1, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %view_1 = aten.call "aten::view.default"(%split_with_sizes_1, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %view_2 = aten.call "aten::view.default"(%split_with_sizes_2, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %unified_kv_cache_update = aten.call "vllm::unified_kv_cache_update.default"(%view_1, %view_2, %ln) : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_attention_with_output.default">, query = %view, key = %view_1, value = %view_2, layer_name = %ln, output_scale = none, kv_cache_dummy_dep = %unified_kv_cache_update, _output_base_index = 0, _output_size = (%arg0, 4, 16), _output_stride = (64, 16, 1), _output_storage_offset = 0, _output_block_scale_base_index = none, _all_bases = [%empty]) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.opaque<"LayerName">, !irfuse.tensor<[0], bf16>, !irfuse.sym<s30>, !irfuse.tensor<[s30, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 64], bf16>)
  func.return %af_1 : !irfuse.tensor<[s30, 64], bf16>
}

// auto_functionalized (v1): the output argument is the view itself; its new value is result 1.
// MLA's output is its flat buffer (v2: the base itself).
// CHECK-LABEL: func.func @v1_and_mla
// CHECK: %[[DEP:.+]] = attn.vllm_kv_cache_update
// CHECK: %[[O:.+]] = attn.vllm_attention %{{.+}}, %{{.+}}, %{{.+}}, kv_cache_dep %[[DEP]] {layer_name = "model.layers.0.self_attn.attn"} : ({{.+}}) -> !irfuse.tensor<[s30, 4, 16], bf16> decomposition {
// CHECK: aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::unified_attention_with_output.default">
// CHECK: aten.call "aten::view.default"(%[[O]], [%arg0, 64])
// CHECK: %[[M:.+]] = attn.vllm_mla_attention %{{.+}}, %{{.+}}, %{{.+}} {layer_name = "mla0"} : (!irfuse.tensor<[s30, 4, 12], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 32], bf16>) -> !irfuse.tensor<[s30, 32], bf16> decomposition {
// CHECK: func.return %{{.+}}, %[[M]]
func.func @v1_and_mla(%arg0: !irfuse.sym<s30>, %arg1: !irfuse.tensor<[s30, 128], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 32], bf16>) {
  %split_with_sizes, %split_with_sizes_1, %split_with_sizes_2 = aten.call tuple "aten::split_with_sizes.default"(%arg1, [64, 32, 32], -1) : (!irfuse.tensor<[s30, 128], bf16>) -> (!irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>)
  %empty = aten.call "aten::empty.memory_format"([%arg0, 64], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 64], bf16>
  %view = aten.call "aten::view.default"(%split_with_sizes, [-1, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %view_1 = aten.call "aten::view.default"(%empty, [-1, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %view_2 = aten.call "aten::view.default"(%split_with_sizes_1, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %view_3 = aten.call "aten::view.default"(%split_with_sizes_2, [-1, 2, 16]) : (!irfuse.tensor<[s30, 32], bf16>) -> !irfuse.tensor<[s30, 2, 16], bf16>
  %unified_kv_cache_update = aten.call "vllm::unified_kv_cache_update.default"(%view_2, %view_3, "model.layers.0.self_attn.attn") : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>) -> !irfuse.tensor<[0], bf16>
  %af, %af_1, %af_2 = aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::unified_attention_with_output.default">, query = %view, key = %view_2, value = %view_3, output = %view_1, layer_name = "model.layers.0.self_attn.attn", output_scale = none, output_block_scale = none, kv_cache_dummy_dep = %unified_kv_cache_update) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[0], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.opaque<"NoneType">)
  %view_4 = aten.call "aten::view.default"(%af_1, [%arg0, 64]) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.sym<s30>) -> !irfuse.tensor<[s30, 64], bf16>
  %view_5 = aten.call "aten::view.default"(%split_with_sizes, [%arg0, 4, 16]) : (!irfuse.tensor<[s30, 64], bf16>, !irfuse.sym<s30>) -> !irfuse.tensor<[s30, 4, 16], bf16>
  %slice = aten.call "aten::slice.Tensor"(%view_5, 2, 0, 12) : (!irfuse.tensor<[s30, 4, 16], bf16>) -> !irfuse.tensor<[s30, 4, 12], bf16>
  %view_6 = aten.call "aten::view.default"(%slice, [%arg0, 4, 12]) : (!irfuse.tensor<[s30, 4, 12], bf16>, !irfuse.sym<s30>) -> !irfuse.tensor<[s30, 4, 12], bf16>
  %view_7 = aten.call "aten::view.default"(%split_with_sizes_2, [%arg0, 1, 32]) : (!irfuse.tensor<[s30, 32], bf16>, !irfuse.sym<s30>) -> !irfuse.tensor<[s30, 1, 32], bf16>
  %empty_1 = aten.call "aten::empty.memory_format"([%arg0, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 32], bf16>
  %mf, %mf_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_mla_attention_with_output.default">, q = %view_6, kv_c_normed = %split_with_sizes_1, k_pe = %view_7, layer_name = "mla0", output_scale = none, kv_cache_dummy_dep = none, quant_group_size = none, quant_scale_ue8m0 = none, quant_col_major = none, quant_tma_aligned = none, q_dcp_replicated = none, _output_base_index = 0, _output_block_scale_base_index = none, _all_bases = [%empty_1]) : (!irfuse.tensor<[s30, 4, 12], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 32], bf16>)
  func.return %view_4, %mf_1 : !irfuse.tensor<[s30, 64], bf16>, !irfuse.tensor<[s30, 32], bf16>
}

// Left alone: a call vLLM already gave its output quant (output_scale), a layer name that is
// neither a constant nor a marked input, an output buffer that is not fresh.
// CHECK-LABEL: func.func @not_raised
// CHECK-NOT: attn.vllm_attention
// CHECK-NOT: attn.vllm_kv_cache_update
// CHECK: func.return
func.func @not_raised(%arg0: !irfuse.sym<s30>, %q: !irfuse.tensor<[s30, 4, 16], bf16>, %k: !irfuse.tensor<[s30, 2, 16], bf16>, %s: !irfuse.tensor<[1], f32>, %ln: !irfuse.opaque<"LayerName">, %buf: !irfuse.tensor<[s30, 64], bf16>) -> (!irfuse.tensor<[s30, 4, 16], f8E4M3FN>, !irfuse.tensor<[0], bf16>, !irfuse.tensor<[s30, 64], bf16>) {
  %empty = aten.call "aten::empty.memory_format"([%arg0, 4, 16], dtype = f8E4M3FN, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 4, 16], f8E4M3FN>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_attention_with_output.default">, query = %q, key = %k, value = %k, layer_name = "l0", output_scale = %s, kv_cache_dummy_dep = none, _output_base_index = 0, _output_block_scale_base_index = none, _all_bases = [%empty]) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s30, 4, 16], f8E4M3FN>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 4, 16], f8E4M3FN>)
  %d = aten.call "vllm::unified_kv_cache_update.default"(%k, %k, %ln) : (!irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  %bf, %bf_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_attention_with_output.default">, query = %q, key = %k, value = %k, layer_name = "l0", output_scale = none, kv_cache_dummy_dep = none, _output_base_index = 0, _output_size = (%arg0, 4, 16), _output_stride = (64, 16, 1), _output_storage_offset = 0, _output_block_scale_base_index = none, _all_bases = [%buf]) : (!irfuse.tensor<[s30, 4, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.tensor<[s30, 2, 16], bf16>, !irfuse.sym<s30>, !irfuse.tensor<[s30, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 64], bf16>)
  func.return %af_1, %d, %bf_1 : !irfuse.tensor<[s30, 4, 16], f8E4M3FN>, !irfuse.tensor<[0], bf16>, !irfuse.tensor<[s30, 64], bf16>
}

// MLA's latent-cache write (vLLM 0.32's MLAAttention.forward): a plain call returning vLLM's
// dummy, raised with its kv_cache_dtype and k_scale; the attention after it reads the dummy.
// CHECK-LABEL: func.func @mla_cache_update
// CHECK: %[[DEP:.+]] = attn.vllm_mla_kv_cache_update %arg1, %arg2, %arg3 {layer_name = "model.layers.0.self_attn.mla_attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[0], bf16> decomposition {
// CHECK-NEXT: ^{{.+}}(%[[C:.+]]: !irfuse.tensor<[s30, 32], bf16>, %[[K:.+]]: !irfuse.tensor<[s30, 1, 16], bf16>, %[[S:.+]]: !irfuse.tensor<[], f32>):
// CHECK-NEXT: aten.call "vllm::unified_mla_kv_cache_update.default"(%[[C]], %[[K]], "model.layers.0.self_attn.mla_attn", "auto", %[[S]])
// CHECK: attn.vllm_mla_attention %arg4, %arg1, %arg2, kv_cache_dep %[[DEP]]
func.func @mla_cache_update(%arg0: !irfuse.sym<s30>, %arg1: !irfuse.tensor<[s30, 32], bf16>, %arg2: !irfuse.tensor<[s30, 1, 16], bf16>, %arg3: !irfuse.tensor<[], f32>, %arg4: !irfuse.tensor<[s30, 4, 32], bf16>) -> !irfuse.tensor<[s30, 32], bf16> {
  %dep = aten.call "vllm::unified_mla_kv_cache_update.default"(%arg1, %arg2, "model.layers.0.self_attn.mla_attn", "auto", %arg3) : (!irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[0], bf16>
  %empty = aten.call "aten::empty.memory_format"([%arg0, 32], dtype = bf16, device = #aten.device<"cpu">, pin_memory = false) : (!irfuse.sym<s30>) -> !irfuse.tensor<[s30, 32], bf16>
  %af, %af_1 = aten.call tuple "hop:auto_functionalized_v2"(#aten.target<"vllm::unified_mla_attention_with_output.default">, q = %arg4, kv_c_normed = %arg1, k_pe = %arg2, layer_name = "model.layers.0.self_attn.mla_attn", output_scale = none, kv_cache_dummy_dep = %dep, quant_group_size = none, quant_scale_ue8m0 = none, quant_col_major = none, quant_tma_aligned = none, q_dcp_replicated = none, _output_base_index = 0, _output_block_scale_base_index = none, _all_bases = [%empty]) : (!irfuse.tensor<[s30, 4, 32], bf16>, !irfuse.tensor<[s30, 32], bf16>, !irfuse.tensor<[s30, 1, 16], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.tensor<[s30, 32], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s30, 32], bf16>)
  func.return %af_1 : !irfuse.tensor<[s30, 32], bf16>
}
