// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @static_no_scale(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q = quant.fp8 %x {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: a static scheme needs the scale operand

// -----

func.func @static_scale_dtype(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], bf16>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], bf16>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: scale must have dtype f32, got bf16

// -----

func.func @static_scale_shape(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[s0, 1], f32>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: scale must hold one element, got shape [s0, 1]

// -----

func.func @static_scale_out(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %so = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[], f32>)
  func.return
}
// CHECK: a static scheme takes its scale as an input: no scale_out

// -----

func.func @static_scale_ub(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = quant.fp8 %x, scale %s, scale_ub %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: scale_ub applies to the dynamic_token scheme only

// -----

func.func @dynamic_with_scale(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q, %so = quant.fp8 %x, scale %s {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return
}
// CHECK: a dynamic_token scheme computes its scale: no scale operand

// -----

func.func @dynamic_no_scale_out(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q = quant.fp8 %x {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: a dynamic_token scheme computes its scale: scale_out is missing

// -----

func.func @token_scale_shape(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0], f32>)
  func.return
}
// CHECK: scale_out has shape [s0], expected [s0, 1]

// -----

func.func @tensor_scale_shape(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[2], f32>)
  func.return
}
// CHECK: scale_out must hold one element, got shape [2]

// -----

func.func @q_dtype(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 4096], f8E5M2>
  func.return
}
// CHECK: q must have dtype f8E4M3FN or f8E4M3FNUZ, got f8E5M2

// -----

func.func @q_shape(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 2048], f8E4M3FN>
  func.return
}
// CHECK: q has shape [s0, 2048], expected [s0, 4096]

// -----

func.func @group_divides(%x: !irfuse.tensor<[s0, 4000], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4000], bf16>) -> (!irfuse.tensor<[s0, 4000], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 31], f32>)
  func.return
}
// CHECK: group size 128 does not divide the hidden size 4000

// -----

func.func @group_scale_shape(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<group 64>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  func.return
}
// CHECK: scale_out has shape [s0, 32], expected [s0, 64]

// -----

func.func @group_size(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<group 32>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 128], f32>)
  func.return
}
// CHECK: group size must be 128 or 64, got 32

// -----

func.func @tma_needs_col_major(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<group 128, tma_aligned>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  func.return
}
// CHECK: tma_aligned scales need col_major

// -----

func.func @nvfp4_scheme_on_fp8(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %q, %so = quant.fp8 %x {scheme = #quant.scheme<nvfp4>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 256], f32>)
  func.return
}
// CHECK: an nvfp4 scheme is not an FP8 quantization (use quant.nvfp4)

// -----

func.func @int_input(%x: !irfuse.tensor<[s0, 64], i32>, %s: !irfuse.tensor<[], f32>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], i32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return
}
// CHECK: x must have a float dtype (f16, bf16, f32, f64), got i32

// -----

func.func @nvfp4_block(%x: !irfuse.tensor<[s0, 40], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[s0, 40], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 20], ui8>, !irfuse.tensor<[s1, 4], f8E4M3FN>)
  func.return
}
// CHECK: x has shape [s0, 40]: NVFP4 needs a static last dim divisible by 16

// -----

func.func @nvfp4_q_shape(%x: !irfuse.tensor<[s0, 64], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], ui8>, !irfuse.tensor<[s1, 4], f8E4M3FN>)
  func.return
}
// CHECK: q has shape [s0, 64], expected [s0, 32]

// -----

func.func @nvfp4_q_dtype(%x: !irfuse.tensor<[s0, 64], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 32], i8>, !irfuse.tensor<[s1, 4], f8E4M3FN>)
  func.return
}
// CHECK: q must have dtype ui8, got i8

// -----

// 200 rows pad to 256 in the swizzled layout.
func.func @nvfp4_swizzle_rows(%x: !irfuse.tensor<[200, 64], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[200, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[200, 32], ui8>, !irfuse.tensor<[200, 4], f8E4M3FN>)
  func.return
}
// CHECK: block_scale has shape [200, 4], expected [256, 4]

// -----

// 64 / 16 = 4 scale columns; 32 / 16 = 2 pads to 4.
func.func @nvfp4_swizzle_cols(%x: !irfuse.tensor<[128, 32], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[128, 32], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[128, 16], ui8>, !irfuse.tensor<[128, 2], f8E4M3FN>)
  func.return
}
// CHECK: block_scale has shape [128, 2], expected [128, 4]

// -----

func.func @nvfp4_scale_dtype(%x: !irfuse.tensor<[128, 64], bf16>, %gs: !irfuse.tensor<[], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[128, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[128, 32], ui8>, !irfuse.tensor<[128, 4], f32>)
  func.return
}
// CHECK: block_scale must have dtype f8E4M3FN, got f32

// -----

func.func @nvfp4_global_scale(%x: !irfuse.tensor<[128, 64], bf16>, %gs: !irfuse.tensor<[2], f32>) {
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[128, 64], bf16>, !irfuse.tensor<[2], f32>) -> (!irfuse.tensor<[128, 32], ui8>, !irfuse.tensor<[128, 4], f8E4M3FN>)
  func.return
}
// CHECK: global_scale must hold one element, got shape [2]

// -----

func.func @static_reciprocal(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>, reciprocal} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  func.return
}
// CHECK: reciprocal applies to the dynamic_token and group schemes only, not static_tensor
