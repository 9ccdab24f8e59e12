// RUN: irfuse-opt %s -p fuse-attn-quant | filecheck %s
// RUN: irfuse-opt %s -p fuse-attn-quant,select-kernels | filecheck %s --check-prefix=KERNEL

// Token-major MLA (vLLM's interface, the built-in model): [T, H, v] -> clone -> view
// [T, H * v] -> static FP8 quant (x / s): one op writing FP8; the CPU runs the reference.
// CHECK-LABEL: func.func @token_major
// CHECK:       %[[O:.+]] = fused.mla_attention_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 1.250000e-01 : f64, causal = true, scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 4, 48], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
// CHECK-NOT:   attn.mla_attention
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[O]]
// KERNEL-LABEL: func.func @token_major
// KERNEL:      kernel.call impl "reference" "irfuse::mla_attention_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, %{{.*}}, 4, 32, 32, 0.125, true, false, f8E4M3FN, divide = true)
func.func @token_major(%q: !irfuse.tensor<[s0, 4, 48], bf16>, %c: !irfuse.tensor<[s0, 64], bf16>, %p: !irfuse.tensor<[s0, 1, 16], bf16>, %w: !irfuse.tensor<[256, 64], bf16>, %s: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN> {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[s0, 4, 48], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %a = aten.call "aten::clone.default"(%o) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %b = aten.call "aten::view.default"(%a, [-1, 128]) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %f = quant.fp8 %b, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 128], f8E4M3FN>
}

// Batch-major MLA with a bool mask (Hugging Face DeepSeek-V2): transpose(1, 2), reshape
// [B, L, H * v], the linear's view [B * L, H * v]; the mask goes with it, and x * (1 / s).
// CHECK-LABEL: func.func @batch_major
// CHECK:       fused.mla_attention_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}}, output_scale %{{[^ ]+}} {{{.*}}batch_major = true, scheme = #quant.scheme<static_tensor>} : ({{.*}}) -> !irfuse.tensor<[16, 128], f8E4M3FN>
// CHECK-NOT:   quant.fp8
// KERNEL-LABEL: func.func @batch_major
// KERNEL:      "irfuse::mla_attention_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 4, 32, 32, 0.125, false, true, f8E4M3FN)
func.func @batch_major(%q: !irfuse.tensor<[2, 4, 8, 48], bf16>, %c: !irfuse.tensor<[2, 1, 8, 64], bf16>, %p: !irfuse.tensor<[2, 1, 8, 16], bf16>, %w: !irfuse.tensor<[256, 64], bf16>, %m: !irfuse.tensor<[2, 1, 8, 8], i1>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[16, 128], f8E4M3FN> {
  %o = attn.mla_attention %q, %c, %p, %w, mask %m {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, batch_major = true} : (!irfuse.tensor<[2, 4, 8, 48], bf16>, !irfuse.tensor<[2, 1, 8, 64], bf16>, !irfuse.tensor<[2, 1, 8, 16], bf16>, !irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[2, 1, 8, 8], i1>) -> !irfuse.tensor<[2, 4, 8, 32], bf16>
  %a = aten.call "aten::transpose.int"(%o, 1, 2) : (!irfuse.tensor<[2, 4, 8, 32], bf16>) -> !irfuse.tensor<[2, 8, 4, 32], bf16>
  %b = aten.call "aten::reshape.default"(%a, [2, 8, 128]) : (!irfuse.tensor<[2, 8, 4, 32], bf16>) -> !irfuse.tensor<[2, 8, 128], bf16>
  %c2 = aten.call "aten::view.default"(%b, [-1, 128]) : (!irfuse.tensor<[2, 8, 128], bf16>) -> !irfuse.tensor<[16, 128], bf16>
  %f = quant.fp8 %c2, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[16, 128], f8E4M3FN>
  func.return %f : !irfuse.tensor<[16, 128], f8E4M3FN>
}

// Not fused (near misses, each a remark; tests/fusions/test_attn_quant_fusion.py reads them):
// a head-major flattening of a batch-major MLA (no transpose: the quant reads [H * L, v] rows,
// "do not flatten its output token-major"); a per-group quant ("static per-tensor only"); an
// output also read unquantized (no remark: the quant is not its only user).
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.mla_attention_quant
// CHECK:       func.return
func.func @negatives(%q: !irfuse.tensor<[1, 4, 8, 48], bf16>, %c: !irfuse.tensor<[1, 1, 8, 64], bf16>, %p: !irfuse.tensor<[1, 1, 8, 16], bf16>, %w: !irfuse.tensor<[256, 64], bf16>, %s: !irfuse.tensor<[], f32>, %qt: !irfuse.tensor<[8, 4, 48], bf16>, %ct: !irfuse.tensor<[8, 64], bf16>, %pt: !irfuse.tensor<[8, 1, 16], bf16>) -> (!irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 2], f32>, !irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 128], bf16>) {
  %o = attn.mla_attention %q, %c, %p, %w {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, causal = true, batch_major = true} : (!irfuse.tensor<[1, 4, 8, 48], bf16>, !irfuse.tensor<[1, 1, 8, 64], bf16>, !irfuse.tensor<[1, 1, 8, 16], bf16>, !irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[1, 4, 8, 32], bf16>
  %v = aten.call "aten::view.default"(%o, [8, 128]) : (!irfuse.tensor<[1, 4, 8, 32], bf16>) -> !irfuse.tensor<[8, 128], bf16>
  %f = quant.fp8 %v, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[8, 128], f8E4M3FN>
  %o2 = attn.mla_attention %qt, %ct, %pt, %w {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[8, 4, 48], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 1, 16], bf16>, !irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[8, 4, 32], bf16>
  %v2 = aten.call "aten::view.default"(%o2, [8, 128]) : (!irfuse.tensor<[8, 4, 32], bf16>) -> !irfuse.tensor<[8, 128], bf16>
  %g, %gs = quant.fp8 %v2 {scheme = #quant.scheme<group 64>} : (!irfuse.tensor<[8, 128], bf16>) -> (!irfuse.tensor<[8, 128], f8E4M3FN>, scale_out !irfuse.tensor<[8, 2], f32>)
  %o3 = attn.mla_attention %qt, %ct, %pt, %w {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[8, 4, 48], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 1, 16], bf16>, !irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[8, 4, 32], bf16>
  %v3 = aten.call "aten::view.default"(%o3, [8, 128]) : (!irfuse.tensor<[8, 4, 32], bf16>) -> !irfuse.tensor<[8, 128], bf16>
  %h = quant.fp8 %v3, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[8, 128], f8E4M3FN>
  func.return %f, %g, %gs, %h, %v3 : !irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 2], f32>, !irfuse.tensor<[8, 128], f8E4M3FN>, !irfuse.tensor<[8, 128], bf16>
}

// NVFP4 output quant (token-major MLA): one op yielding the packed codes and the swizzled block
// scales, the global scale as its output scale; the CPU runs the reference.
// CHECK-LABEL: func.func @nvfp4
// CHECK:       %[[Q:.+]], %[[BS:.+]] = fused.mla_attention_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {{{.*}}causal = true, scheme = #quant.scheme<nvfp4>} : ({{.*}}) -> (!irfuse.tensor<[8, 64], ui8>, scale_out !irfuse.tensor<[128, 8], f8E4M3FN>)
// CHECK-NOT:   attn.mla_attention
// CHECK-NOT:   quant.nvfp4
// CHECK:       func.return %[[Q]], %[[BS]]
// KERNEL-LABEL: func.func @nvfp4
// KERNEL:      kernel.call impl "reference" tuple "irfuse::mla_attention_quant_nvfp4.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, %{{.*}}, 4, 32, 32, 0.125, true, false)
func.func @nvfp4(%qt: !irfuse.tensor<[8, 4, 48], bf16>, %ct: !irfuse.tensor<[8, 64], bf16>, %pt: !irfuse.tensor<[8, 1, 16], bf16>, %w: !irfuse.tensor<[256, 64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[8, 64], ui8>, !irfuse.tensor<[128, 8], f8E4M3FN>) {
  %o = attn.mla_attention %qt, %ct, %pt, %w {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 64 : i64, scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[8, 4, 48], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 1, 16], bf16>, !irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[8, 4, 32], bf16>
  %v = aten.call "aten::view.default"(%o, [8, 128]) : (!irfuse.tensor<[8, 4, 32], bf16>) -> !irfuse.tensor<[8, 128], bf16>
  %q, %bs = quant.nvfp4 %v, %gs : (!irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[8, 64], ui8>, !irfuse.tensor<[128, 8], f8E4M3FN>)
  func.return %q, %bs : !irfuse.tensor<[8, 64], ui8>, !irfuse.tensor<[128, 8], f8E4M3FN>
}
