// RUN: irfuse-opt %s -p fuse-act-quant | filecheck %s
// RUN: irfuse-opt %s -p fuse-act-quant,select-kernels | filecheck %s --check-prefix=KERNEL

// SiLU·Mul -> static FP8.
// CHECK-LABEL: func.func @static
// CHECK:       %[[Q:.+]] = fused.silu_mul_quant %[[X:.+]], scale %[[S:.+]] {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
// CHECK-NOT:   act.silu_mul
// CHECK:       func.return %[[Q]]
// KERNEL-LABEL: func.func @static
// KERNEL:      kernel.call impl "reference" "irfuse::silu_mul_quant_fp8_static.default"(%{{.*}}, %{{.*}}, f8E4M3FN)
func.func @static(%x: !irfuse.tensor<[s0, 256], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN> {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %q : !irfuse.tensor<[s0, 128], f8E4M3FN>
}

// Per-group 128, row-major, through the view(-1, I) of the down projection.
// CHECK-LABEL: func.func @group_view
// CHECK:       %[[FX:.+]] = aten.call "aten::flatten.using_ints"(%{{.*}}, 0, 1) : (!irfuse.tensor<[2, s0, 512], bf16>) -> !irfuse.tensor<["2*s0", 512], bf16>
// CHECK:       %[[Q:.+]], %[[SC:.+]] = fused.silu_mul_quant %[[FX]] {scheme = #quant.scheme<group 128>}
// CHECK:       func.return %[[Q]], %[[SC]]
// KERNEL-LABEL: func.func @group_view
// KERNEL:      "irfuse::silu_mul_quant_fp8_group.default"(%{{.*}}, 128, false, false, f8E4M3FN)
func.func @group_view(%x: !irfuse.tensor<[2, s0, 512], bf16>) -> (!irfuse.tensor<["2*s0", 256], f8E4M3FN>, !irfuse.tensor<["2*s0", 2], f32>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[2, s0, 512], bf16>) -> !irfuse.tensor<[2, s0, 256], bf16>
  %v = aten.call "aten::view.default"(%y, [-1, 256]) : (!irfuse.tensor<[2, s0, 256], bf16>) -> !irfuse.tensor<["2*s0", 256], bf16>
  %q, %sc = quant.fp8 %v {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<["2*s0", 256], bf16>) -> (!irfuse.tensor<["2*s0", 256], f8E4M3FN>, scale_out !irfuse.tensor<["2*s0", 2], f32>)
  func.return %q, %sc : !irfuse.tensor<["2*s0", 256], f8E4M3FN>, !irfuse.tensor<["2*s0", 2], f32>
}

// NVFP4.
// CHECK-LABEL: func.func @nvfp4
// CHECK:       %[[Q:.+]], %[[BS:.+]] = fused.silu_mul_quant_nvfp4 %{{.*}}, %{{.*}}
// CHECK:       func.return %[[Q]], %[[BS]]
// KERNEL-LABEL: func.func @nvfp4
// KERNEL:      kernel.call impl "reference" tuple "irfuse::silu_mul_quant_nvfp4.default"(%{{.*}}, %{{.*}})
func.func @nvfp4(%x: !irfuse.tensor<[256, 64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 16], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[256, 32], bf16>
  %q, %bs = quant.nvfp4 %y, %gs : (!irfuse.tensor<[256, 32], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 16], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>)
  func.return %q, %bs : !irfuse.tensor<[256, 16], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>
}

// Separate gate and up tensors (Hugging Face MLPs): the kernel reads both.
// CHECK-LABEL: func.func @separate_up
// CHECK:       %[[Q:.+]] = fused.silu_mul_quant %[[G:.+]], scale %[[S:.+]], up %[[U:.+]] {scheme = #quant.scheme<static_tensor>}
// CHECK:       func.return %[[Q]]
// KERNEL-LABEL: func.func @separate_up
// KERNEL:      "irfuse::silu_mul_quant_fp8_static.default"(%{{.*}}, %{{.*}}, f8E4M3FN, up = %{{.*}})
func.func @separate_up(%g: !irfuse.tensor<[s0, 128], bf16>, %u: !irfuse.tensor<[s0, 128], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN> {
  %y = act.silu_mul %g, up %u : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %q : !irfuse.tensor<[s0, 128], f8E4M3FN>
}

// Negative: a dynamic per-token quant (no kernel); an output with another, unquantized user.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.silu_mul_quant
// CHECK:       func.return
func.func @negatives(%x: !irfuse.tensor<[s0, 256], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], bf16>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q, %qs = quant.fp8 %y {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 128], bf16>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  %y3 = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q3 = quant.fp8 %y3, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %q, %q3, %y3 : !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], bf16>
}

// A static quant spelled `y / s` (`divide`), one-tensor and separate-up forms: the fused op and
// its kernel call keep the spelling (a keyword after `up`).
// CHECK-LABEL: func.func @static_divide
// CHECK:       %[[Q:.+]] = fused.silu_mul_quant %{{.*}}, scale %{{.*}} {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
// CHECK:       %[[Q2:.+]] = fused.silu_mul_quant %{{.*}}, scale %{{.*}}, up %{{.*}} {scheme = #quant.scheme<static_tensor>, divide}
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Q]], %[[Q2]]
// KERNEL-LABEL: func.func @static_divide
// KERNEL:      "irfuse::silu_mul_quant_fp8_static.default"(%{{.*}}, %{{.*}}, f8E4M3FN, divide = true)
// KERNEL:      "irfuse::silu_mul_quant_fp8_static.default"(%{{.*}}, %{{.*}}, f8E4M3FN, up = %{{.*}}, divide = true)
func.func @static_divide(%x: !irfuse.tensor<[s0, 256], bf16>, %g: !irfuse.tensor<[s0, 128], bf16>, %u: !irfuse.tensor<[s0, 128], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  %y2 = act.silu_mul %g, up %u : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q2 = quant.fp8 %y2, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %q, %q2 : !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>
}

// Negative: one activation quantized with one scale spelled two ways: two different quants.
// CHECK-LABEL: func.func @mixed_divide
// CHECK:       act.silu_mul
// CHECK-NOT:   fused.silu_mul_quant
// CHECK:       func.return
func.func @mixed_divide(%x: !irfuse.tensor<[s0, 256], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %a = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  %b = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 128], f8E4M3FN>
  func.return %a, %b : !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 128], f8E4M3FN>
}

// A per-group quant spelled `y * s.reciprocal()` (its `reciprocal`): the fused op and the kernel
// call keep it.
// CHECK-LABEL: func.func @group_reciprocal
// CHECK:       fused.silu_mul_quant %{{.*}} {scheme = #quant.scheme<group 64>, reciprocal}
// KERNEL-LABEL: func.func @group_reciprocal
// KERNEL:      "irfuse::silu_mul_quant_fp8_group.default"(%{{.*}}, 64, false, false, f8E4M3FN, reciprocal = true)
func.func @group_reciprocal(%x: !irfuse.tensor<[s0, 256], bf16>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 2], f32>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q, %sc = quant.fp8 %y {scheme = #quant.scheme<group 64>, reciprocal} : (!irfuse.tensor<[s0, 128], bf16>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 2], f32>)
  func.return %q, %sc : !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 2], f32>
}
