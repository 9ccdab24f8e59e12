// RUN: irfuse-opt %s --split-input-file -p fuse-attn-quant | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p fuse-attn-quant,select-kernels | filecheck %s --check-prefix=KERNEL

// vLLM's attention call (raise-vllm-attention's output) -> the reshapes of Attention.forward ->
// a static FP8 quant. On the CPU backend (no output quant of its own) irfuse's kernel takes it:
// vLLM's attention into a bf16 buffer, then the quant reference (the unfused graph's bits).
// CHECK-LABEL: func.func @kernel
// CHECK:       %[[Y:.+]] = fused.vllm_attention_quant %[[Q:[^ ]+]], %[[K:[^ ]+]], %[[V:[^ ]+]], %[[S:[^ ]+]], kv_cache_dep %[[D:[^ ]+]] {layer_name = "model.layers.0.self_attn.attn", scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
// NVFP4: the global scale, the packed codes and swizzled block scales.
// CHECK:       %[[C:.+]], %[[B:.+]] = fused.vllm_attention_quant %{{.+}}, %{{.+}}, %{{.+}}, %{{[^ ]+}} {layer_name = "l1", scheme = #quant.scheme<nvfp4>} : ({{.+}}) -> (!irfuse.tensor<[s0, 32], ui8>, scale_out !irfuse.tensor<[s1, 4], f8E4M3FN>)
// MLA: its flat output.
// CHECK:       %[[M:.+]] = fused.vllm_attention_quant %{{.+}}, %{{.+}}, %{{.+}}, %{{[^ ]+}} {layer_name = "m0", scheme = #quant.scheme<static_tensor>, mla} : ({{.+}}) -> !irfuse.tensor<[s0, 32], f8E4M3FN>
// CHECK-NOT:   quant.
// CHECK:       func.return %[[Y]], %[[C]], %[[B]], %[[M]]
// KERNEL-LABEL: func.func @kernel
// KERNEL:      kernel.call impl "reference" "irfuse::vllm_attention_quant_fp8_static.default"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, "model.layers.0.self_attn.attn", %{{.+}}, [4, 16], false, f8E4M3FN)
// KERNEL:      kernel.call impl "reference" tuple "irfuse::vllm_attention_quant_nvfp4.default"(%{{.+}}, %{{.+}}, %{{.+}}, none, "l1", %{{.+}}, [4, 16], false)
// KERNEL:      kernel.call impl "reference" "irfuse::vllm_attention_quant_fp8_static.default"(%{{.+}}, %{{.+}}, %{{.+}}, none, "m0", %{{.+}}, [32], true, f8E4M3FN)
builtin.module attributes {irfuse.platform = "cpu", irfuse.vllm_layers = {model.layers.0.self_attn.attn = {backend = "CPU_ATTN", output_quant = []}}} {
  func.func @kernel(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 4, 16], bf16>, %k: !irfuse.tensor<[s0, 2, 16], bf16>, %d: !irfuse.tensor<[0], bf16>, %s: !irfuse.tensor<[1], f32>, %mq: !irfuse.tensor<[s0, 4, 12], bf16>, %kvc: !irfuse.tensor<[s0, 32], bf16>, %kpe: !irfuse.tensor<[s0, 1, 8], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 32], ui8>, !irfuse.tensor<[s1, 4], f8E4M3FN>, !irfuse.tensor<[s0, 32], f8E4M3FN>) {
    %o = attn.vllm_attention %q, %k, %k, kv_cache_dep %d {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f = aten.call "aten::flatten.using_ints"(%o, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %v1 = aten.call "aten::view.default"(%f, [-1, 4, 16]) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %v2 = aten.call "aten::view.default"(%v1, [-1, 64]) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %y = quant.fp8 %v2, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
    %o2 = attn.vllm_attention %q, %k, %k {layer_name = "l1"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f2 = aten.call "aten::flatten.using_ints"(%o2, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %c, %b = quant.nvfp4 %f2, %s : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s0, 32], ui8>, !irfuse.tensor<[s1, 4], f8E4M3FN>)
    %m = attn.vllm_mla_attention %mq, %kvc, %kpe {layer_name = "m0"} : (!irfuse.tensor<[s0, 4, 12], bf16>, !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 1, 8], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
    %my = quant.fp8 %m, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], f8E4M3FN>
    func.return %y, %c, %b, %my : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 32], ui8>, !irfuse.tensor<[s1, 4], f8E4M3FN>, !irfuse.tensor<[s0, 32], f8E4M3FN>
  }
}

// -----

// The layer's backend writes the FP8 output itself (vLLM's Triton attention; FlashInfer on
// sm100): vLLM's call gets an FP8 [T, H, D] buffer and output_scale, its output reshaped
// [-1, H * D], as vLLM's own fusion does. The hoisted LayerName is passed on.
// CHECK-LABEL: func.func @backend
// CHECK:       %[[T:.+]] = aten.call "aten::sym_size.int"(%[[Q:[^ ]+]], 0) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.sym<s0>
// CHECK-NEXT:  %[[BUF:.+]] = aten.call "aten::new_empty.default"(%[[Q]], [%[[T]], 4, 16], dtype = f8E4M3FN) : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 4, 16], f8E4M3FN>
// CHECK-NEXT:  %{{.+}}, %[[O:.+]], %{{.+}} = aten.call tuple "hop:auto_functionalized"(#aten.target<"vllm::unified_attention_with_output.default">, query = %[[Q]], key = %{{.+}}, value = %{{.+}}, output = %[[BUF]], layer_name = %[[LN:[^ ,]+]], output_scale = %[[S:[^ ,]+]], output_block_scale = none, kv_cache_dummy_dep = %{{.+}})
// CHECK-NEXT:  %[[Y:.+]] = aten.call "aten::reshape.default"(%[[O]], [-1, 64]) : (!irfuse.tensor<[s0, 4, 16], f8E4M3FN>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Y]]
// KERNEL-LABEL: func.func @backend
// KERNEL-NOT:  kernel.call
builtin.module attributes {irfuse.platform = "cpu", irfuse.vllm_layers = {l0 = {backend = "TRITON_ATTN", output_quant = ["static_tensor"]}}} {
  func.func @backend(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 4, 16], bf16>, %k: !irfuse.tensor<[s0, 2, 16], bf16>, %d: !irfuse.tensor<[0], bf16>, %s: !irfuse.tensor<[1], f32>, %ln: !irfuse.opaque<"LayerName"> {irfuse.layer_name = "l0"}) -> !irfuse.tensor<[s0, 64], f8E4M3FN> {
    %o = attn.vllm_attention %q, %k, %k, kv_cache_dep %d, layer %ln {layer_name = "l0"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f = aten.call "aten::flatten.using_ints"(%o, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %y = quant.fp8 %f, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
    func.return %y : !irfuse.tensor<[s0, 64], f8E4M3FN>
  }
}

// -----

// FLASH_ATTN on sm100 takes no output quant and irfuse's kernel is not measured there: left
// unfused (a remark: tests/fusions/test_attn_quant_in_vllm.py). A dynamic quant, and an output
// also read unquantized, are not fused on any platform.
// CHECK-LABEL: func.func @unfused
// CHECK-NOT:   fused.vllm_attention_quant
// CHECK-NOT:   auto_functionalized
// CHECK:       attn.vllm_attention
// CHECK:       quant.fp8
// CHECK:       attn.vllm_attention
// CHECK:       quant.fp8
// CHECK:       attn.vllm_attention
// CHECK:       quant.fp8
builtin.module attributes {irfuse.platform = "cuda:sm100", irfuse.vllm_layers = {l0 = {backend = "FLASH_ATTN", output_quant = []}}} {
  func.func @unfused(%q: !irfuse.tensor<[s0, 4, 16], bf16>, %k: !irfuse.tensor<[s0, 2, 16], bf16>, %s: !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
    %o = attn.vllm_attention %q, %k, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f = aten.call "aten::flatten.using_ints"(%o, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %y = quant.fp8 %f, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
    %o2 = attn.vllm_attention %q, %k, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f2 = aten.call "aten::flatten.using_ints"(%o2, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %y2, %s2 = quant.fp8 %f2 {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
    %o3 = attn.vllm_attention %q, %k, %k {layer_name = "l0"} : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>, !irfuse.tensor<[s0, 2, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
    %f3 = aten.call "aten::flatten.using_ints"(%o3, 1, 2) : (!irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %y3 = quant.fp8 %f3, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
    func.return %y, %y2, %s2, %y3, %f3 : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
  }
}
