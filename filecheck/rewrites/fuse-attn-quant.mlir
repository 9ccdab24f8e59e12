// RUN: irfuse-opt %s -p fuse-attn-quant | filecheck %s
// RUN: irfuse-opt %s -p fuse-attn-quant,select-kernels | filecheck %s --check-prefix=KERNEL

// Causal prefill in the built-in models' spelling: squeeze the batch, transpose to token-major,
// view [T, H * Dv], static FP8 quant (x / s): one op writing the FP8 output.
// CHECK-LABEL: func.func @prefill
// CHECK:       %[[O:.+]] = fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {scale = 1.250000e-01 : f64, causal = true, scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
// CHECK-NOT:   attn.attention
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[O]]
// KERNEL-LABEL: func.func @prefill
// KERNEL:      kernel.call impl "reference" "irfuse::attention_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, none, %{{.*}}, 0.125, true, f8E4M3FN, divide = true)
func.func @prefill(%q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 64], bf16>, %s: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN> {
  %o = attn.attention %q, %k, %v {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16>
  %a = aten.call "aten::squeeze.dim"(%o, 0) : (!irfuse.tensor<[1, 4, s0, 64], bf16>) -> !irfuse.tensor<[4, s0, 64], bf16>
  %b = aten.call "aten::transpose.int"(%a, 0, 1) : (!irfuse.tensor<[4, s0, 64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %c = aten.call "aten::view.default"(%b, [-1, 256]) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 256], f8E4M3FN>
}

// Hugging Face: transpose(1, 2), reshape to [B, T, H * Dv], the linear's view to [B * T, H * Dv].
// CHECK-LABEL: func.func @hf
// CHECK:       fused.attention_quant
// CHECK-NOT:   quant.fp8
func.func @hf(%q: !irfuse.tensor<[2, 4, 8, 64], bf16>, %k: !irfuse.tensor<[2, 4, 8, 64], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[16, 256], f8E4M3FN> {
  %o = attn.attention %q, %k, %k {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>, !irfuse.tensor<[2, 4, 8, 64], bf16>) -> !irfuse.tensor<[2, 4, 8, 64], bf16>
  %a = aten.call "aten::transpose.int"(%o, 1, 2) : (!irfuse.tensor<[2, 4, 8, 64], bf16>) -> !irfuse.tensor<[2, 8, 4, 64], bf16>
  %b = aten.call "aten::reshape.default"(%a, [2, 8, 256]) : (!irfuse.tensor<[2, 8, 4, 64], bf16>) -> !irfuse.tensor<[2, 8, 256], bf16>
  %c = aten.call "aten::view.default"(%b, [-1, 256]) : (!irfuse.tensor<[2, 8, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[16, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[16, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[16, 256], f8E4M3FN>
}

// Paged decode: one query per sequence over its gathered pages, with the length mask; the
// [B, H, 1, Dv] output flattens to [B, H * Dv].
// CHECK-LABEL: func.func @decode
// CHECK:       fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}}, output_scale
// KERNEL-LABEL: func.func @decode
// KERNEL:      "irfuse::attention_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 0.125, false, f8E4M3FN)
func.func @decode(%q: !irfuse.tensor<[s0, 4, 1, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64, 64], bf16>, %m: !irfuse.tensor<[s0, 1, 1, 64], i1>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN> {
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 1, 1, 64], i1>) -> !irfuse.tensor<[s0, 4, 1, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [-1, 256]) : (!irfuse.tensor<[s0, 4, 1, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 256], f8E4M3FN>
}

// Paged decode spelled in torch: each sequence's pages gathered through its block-table row
// (index, view, transpose), the mask of its first seq_lens[b] positions (arange < seq_lens),
// attention of its one query: one op that reads the pages in place; the gather and the mask go.
// CHECK-LABEL: func.func @paged_decode
// CHECK:       %[[O:.+]] = fused.paged_decode_quant %q, %kc, %vc, %bt, %sl, %s {scale = 1.250000e-01 : f64, scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>, !irfuse.tensor<[s0], i32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
// CHECK-NOT:   aten::index.Tensor
// CHECK-NOT:   aten::arange
// CHECK-NOT:   aten::lt
// CHECK:       func.return %[[O]]
// KERNEL-LABEL: func.func @paged_decode
// KERNEL:      kernel.call impl "reference" "irfuse::paged_decode_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 0.125, f8E4M3FN)
func.func @paged_decode(%q: !irfuse.tensor<[s0, 4, 1, 64], bf16>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %vc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %bt: !irfuse.tensor<[s0, 4], i32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN> {
  %ki = aten.call "aten::index.Tensor"(%kc, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %kv = aten.call "aten::view.default"(%ki, [-1, 64, 2, 64]) : (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) -> !irfuse.tensor<[s0, 64, 2, 64], bf16>
  %k = aten.call "aten::transpose.int"(%kv, 1, 2) : (!irfuse.tensor<[s0, 64, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64, 64], bf16>
  %vi = aten.call "aten::index.Tensor"(%vc, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %vv = aten.call "aten::view.default"(%vi, [-1, 64, 2, 64]) : (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) -> !irfuse.tensor<[s0, 64, 2, 64], bf16>
  %v = aten.call "aten::transpose.int"(%vv, 1, 2) : (!irfuse.tensor<[s0, 64, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64, 64], bf16>
  %ar = aten.call "aten::arange.default"(64, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[64], i64>
  %pos = aten.call "aten::unsqueeze.default"(%ar, 0) : (!irfuse.tensor<[64], i64>) -> !irfuse.tensor<[1, 64], i64>
  %len = aten.call "aten::unsqueeze.default"(%sl, 1) : (!irfuse.tensor<[s0], i32>) -> !irfuse.tensor<[s0, 1], i32>
  %lt = aten.call "aten::lt.Tensor"(%pos, %len) : (!irfuse.tensor<[1, 64], i64>, !irfuse.tensor<[s0, 1], i32>) -> !irfuse.tensor<[s0, 64], i1>
  %m1 = aten.call "aten::unsqueeze.default"(%lt, 1) : (!irfuse.tensor<[s0, 64], i1>) -> !irfuse.tensor<[s0, 1, 64], i1>
  %m = aten.call "aten::unsqueeze.default"(%m1, 2) : (!irfuse.tensor<[s0, 1, 64], i1>) -> !irfuse.tensor<[s0, 1, 1, 64], i1>
  %o = attn.attention %q, %k, %v, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 1, 1, 64], i1>) -> !irfuse.tensor<[s0, 4, 1, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [-1, 256]) : (!irfuse.tensor<[s0, 4, 1, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 256], f8E4M3FN>
}

// The additive mask SDPA's CUDA path makes of the bool one (where(m, 0, -65504), rounded to
// bf16), with the lengths compared the other way round (seq_lens > arange): the same op.
// CHECK-LABEL: func.func @paged_decode_additive
// CHECK:       fused.paged_decode_quant
// CHECK-NOT:   aten::where
// A mask that is not a length mask (positions compared with another tensor's values): the
// attention over the gathered pages stays as it is, fused with its quant.
// CHECK-LABEL: func.func @paged_decode_other_mask
// CHECK:       aten::index.Tensor
// CHECK:       fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, mask
func.func @paged_decode_additive(%q: !irfuse.tensor<[s0, 4, 1, 64], bf16>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %bt: !irfuse.tensor<[s0, 4], i32>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN> {
  %ki = aten.call "aten::index.Tensor"(%kc, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %kv = aten.call "aten::view.default"(%ki, [-1, 64, 2, 64]) : (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) -> !irfuse.tensor<[s0, 64, 2, 64], bf16>
  %k = aten.call "aten::transpose.int"(%kv, 1, 2) : (!irfuse.tensor<[s0, 64, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64, 64], bf16>
  %ar = aten.call "aten::arange.start"(0, 64, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[64], i64>
  %pos = aten.call "aten::unsqueeze.default"(%ar, 0) : (!irfuse.tensor<[64], i64>) -> !irfuse.tensor<[1, 64], i64>
  %len = aten.call "aten::unsqueeze.default"(%sl, 1) : (!irfuse.tensor<[s0], i32>) -> !irfuse.tensor<[s0, 1], i32>
  %gt = aten.call "aten::gt.Tensor"(%len, %pos) : (!irfuse.tensor<[s0, 1], i32>, !irfuse.tensor<[1, 64], i64>) -> !irfuse.tensor<[s0, 64], i1>
  %m1 = aten.call "aten::view.default"(%gt, [-1, 1, 1, 64]) : (!irfuse.tensor<[s0, 64], i1>) -> !irfuse.tensor<[s0, 1, 1, 64], i1>
  %zero = aten.call "aten::scalar_tensor.default"(0.0, dtype = bf16) : () -> !irfuse.tensor<[], bf16>
  %fill = aten.call "aten::scalar_tensor.default"(-65536.0, dtype = bf16) : () -> !irfuse.tensor<[], bf16>
  %m = aten.call "aten::where.self"(%m1, %zero, %fill) : (!irfuse.tensor<[s0, 1, 1, 64], i1>, !irfuse.tensor<[], bf16>, !irfuse.tensor<[], bf16>) -> !irfuse.tensor<[s0, 1, 1, 64], bf16>
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 1, 1, 64], bf16>) -> !irfuse.tensor<[s0, 4, 1, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [-1, 256]) : (!irfuse.tensor<[s0, 4, 1, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 256], f8E4M3FN>
}

func.func @paged_decode_other_mask(%q: !irfuse.tensor<[s0, 4, 1, 64], bf16>, %kc: !irfuse.tensor<[81, 16, 2, 64], bf16>, %bt: !irfuse.tensor<[s0, 4], i32>, %other: !irfuse.tensor<[1, 64], i64>, %sl: !irfuse.tensor<[s0], i32>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN> {
  %ki = aten.call "aten::index.Tensor"(%kc, [%bt]) : (!irfuse.tensor<[81, 16, 2, 64], bf16>, !irfuse.tensor<[s0, 4], i32>) -> !irfuse.tensor<[s0, 4, 16, 2, 64], bf16>
  %kv = aten.call "aten::view.default"(%ki, [-1, 64, 2, 64]) : (!irfuse.tensor<[s0, 4, 16, 2, 64], bf16>) -> !irfuse.tensor<[s0, 64, 2, 64], bf16>
  %k = aten.call "aten::transpose.int"(%kv, 1, 2) : (!irfuse.tensor<[s0, 64, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64, 64], bf16>
  %len = aten.call "aten::unsqueeze.default"(%sl, 1) : (!irfuse.tensor<[s0], i32>) -> !irfuse.tensor<[s0, 1], i32>
  %lt = aten.call "aten::lt.Tensor"(%other, %len) : (!irfuse.tensor<[1, 64], i64>, !irfuse.tensor<[s0, 1], i32>) -> !irfuse.tensor<[s0, 64], i1>
  %m = aten.call "aten::view.default"(%lt, [-1, 1, 1, 64]) : (!irfuse.tensor<[s0, 64], i1>) -> !irfuse.tensor<[s0, 1, 1, 64], i1>
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 1, 1, 64], i1>) -> !irfuse.tensor<[s0, 4, 1, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [-1, 256]) : (!irfuse.tensor<[s0, 4, 1, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 256], f8E4M3FN>
  func.return %f : !irfuse.tensor<[s0, 256], f8E4M3FN>
}

// NVFP4 output quant of causal prefill (o_proj's input in NVFP4): one op yielding the packed
// codes and the swizzled block scales, the global scale as its output scale.
// CHECK-LABEL: func.func @prefill_nvfp4
// CHECK:       %[[Q:.+]], %[[BS:.+]] = fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, output_scale %{{[^ ]+}} {scale = 1.250000e-01 : f64, causal = true, scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], ui8>, scale_out !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>)
// CHECK-NOT:   attn.attention
// CHECK-NOT:   quant.nvfp4
// CHECK:       func.return %[[Q]], %[[BS]]
// KERNEL-LABEL: func.func @prefill_nvfp4
// KERNEL:      kernel.call impl "reference" tuple "irfuse::attention_quant_nvfp4.default"(%{{.*}}, %{{.*}}, %{{.*}}, none, %{{.*}}, 0.125, true)
func.func @prefill_nvfp4(%q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>) {
  %o = attn.attention %q, %k, %v {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16>
  %a = aten.call "aten::squeeze.dim"(%o, 0) : (!irfuse.tensor<[1, 4, s0, 64], bf16>) -> !irfuse.tensor<[4, s0, 64], bf16>
  %b = aten.call "aten::transpose.int"(%a, 0, 1) : (!irfuse.tensor<[4, s0, 64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %c = aten.call "aten::view.default"(%b, [-1, 256]) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f, %bs = quant.nvfp4 %c, %gs : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>)
  func.return %f, %bs : !irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>
}

// NVFP4 after the paged decode step (gathered pages, the length mask): [B, H, 1, Dv] -> [B, H * Dv].
// CHECK-LABEL: func.func @decode_nvfp4
// CHECK:       fused.attention_quant %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}}, output_scale %{{[^ ]+}} {scale = 1.250000e-01 : f64, scheme = #quant.scheme<nvfp4>}
// CHECK-NOT:   quant.nvfp4
// KERNEL-LABEL: func.func @decode_nvfp4
// KERNEL:      "irfuse::attention_quant_nvfp4.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 0.125, false)
func.func @decode_nvfp4(%q: !irfuse.tensor<[s0, 4, 1, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64, 64], bf16>, %m: !irfuse.tensor<[s0, 1, 1, 64], i1>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>) {
  %o = attn.attention %q, %k, %k, mask %m {scale = 0.125 : f64} : (!irfuse.tensor<[s0, 4, 1, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 2, 64, 64], bf16>, !irfuse.tensor<[s0, 1, 1, 64], i1>) -> !irfuse.tensor<[s0, 4, 1, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [-1, 256]) : (!irfuse.tensor<[s0, 4, 1, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %f, %bs = quant.nvfp4 %c, %gs : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>)
  func.return %f, %bs : !irfuse.tensor<[s0, 128], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 16], f8E4M3FN>
}

// Not fused: an NVFP4 quant of a head-major flattening (the quant reads [H * T, Dv] rows) is a
// remark, as for FP8.
// CHECK-LABEL: func.func @nvfp4_head_major
// CHECK:       attn.attention
// CHECK:       quant.nvfp4
// CHECK-NOT:   fused.attention_quant
func.func @nvfp4_head_major(%q4: !irfuse.tensor<[1, 4, 8, 64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[8, 128], ui8>, !irfuse.tensor<[128, 16], f8E4M3FN>) {
  %o = attn.attention %q4, %q4, %q4 {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[1, 4, 8, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [8, 256]) : (!irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[8, 256], bf16>
  %f, %bs = quant.nvfp4 %c, %gs : (!irfuse.tensor<[8, 256], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[8, 128], ui8>, !irfuse.tensor<[128, 16], f8E4M3FN>)
  func.return %f, %bs : !irfuse.tensor<[8, 128], ui8>, !irfuse.tensor<[128, 16], f8E4M3FN>
}

// Not fused: a head-major flattening (no transpose: the quant reads [H * T, Dv] rows); a
// per-group quant.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.attention_quant
// CHECK:       func.return
func.func @negatives(%q: !irfuse.tensor<[4, 8, 64], bf16>, %s: !irfuse.tensor<[], f32>, %q4: !irfuse.tensor<[1, 4, 8, 64], bf16>) -> (!irfuse.tensor<[8, 256], f8E4M3FN>, !irfuse.tensor<[8, 256], f8E4M3FN>, !irfuse.tensor<[8, 2], f32>) {
  %o = attn.attention %q4, %q4, %q4 {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[1, 4, 8, 64], bf16>
  %c = aten.call "aten::view.default"(%o, [8, 256]) : (!irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[8, 256], bf16>
  %f = quant.fp8 %c, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[8, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[8, 256], f8E4M3FN>
  %o2 = attn.attention %q4, %q4, %q4 {scale = 0.125 : f64, causal = true} : (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[1, 4, 8, 64], bf16>
  %a2 = aten.call "aten::transpose.int"(%o2, 1, 2) : (!irfuse.tensor<[1, 4, 8, 64], bf16>) -> !irfuse.tensor<[1, 8, 4, 64], bf16>
  %c2 = aten.call "aten::reshape.default"(%a2, [8, 256]) : (!irfuse.tensor<[1, 8, 4, 64], bf16>) -> !irfuse.tensor<[8, 256], bf16>
  %g, %gs = quant.fp8 %c2 {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[8, 256], bf16>) -> (!irfuse.tensor<[8, 256], f8E4M3FN>, scale_out !irfuse.tensor<[8, 2], f32>)
  func.return %f, %g, %gs : !irfuse.tensor<[8, 256], f8E4M3FN>, !irfuse.tensor<[8, 256], f8E4M3FN>, !irfuse.tensor<[8, 2], f32>
}
