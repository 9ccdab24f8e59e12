// RUN: irfuse-opt %s -p fuse-norm-quant | filecheck %s
// RUN: irfuse-opt %s -p fuse-norm-quant,select-kernels | filecheck %s --check-prefix=KERNEL

// Residual add + RMSNorm -> static FP8: one fused op; eps 3e-06 is an attribute like any other.
// CHECK-LABEL: func.func @add_static
// CHECK:       %[[Q:.+]], %[[R:.+]] = fused.rms_norm_quant %[[X:.+]], residual %[[RES:.+]], weight %[[W:.+]], scales [%[[S:.+]]] {eps = 3.000000e-06 : f64, scheme = #quant.scheme<static_tensor>} :
// CHECK-NOT:   norm.add_rms_norm
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Q]], %[[R]]
// KERNEL-LABEL: func.func @add_static
// KERNEL:      kernel.call impl "reference" tuple "irfuse::add_rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, [%{{.*}}], 3.0e-06, 0.0, f8E4M3FN)
func.func @add_static(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 3.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %r : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// The last layer's form: the new residual is dead; the plain norm has no residual at all.
// CHECK-LABEL: func.func @dead_residual
// CHECK:       %[[Q:.+]], %{{.+}} = fused.rms_norm_quant %{{.*}}, residual %{{.*}}, weight %{{.*}}, scales [%{{.*}}] {eps = 1.000000e-05 : f64, scheme = #quant.scheme<static_tensor>}
// CHECK:       func.return %[[Q]]
func.func @dead_residual(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q : !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Identical quants merge; quants with different scales share one kernel, one output each.
// CHECK-LABEL: func.func @multi
// CHECK:       %[[Q1:.+]], %[[Q2:.+]] = fused.rms_norm_quant %{{.*}}, weight %{{.*}}, scales [%[[S1:.+]], %[[S2:.+]]] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>}
// CHECK:       func.return %[[Q1]], %[[Q2]], %[[Q1]]
// KERNEL-LABEL: func.func @multi
// KERNEL:      kernel.call impl "reference" tuple "irfuse::rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, [%{{.*}}, %{{.*}}], 1.0e-06, 0.0, f8E4M3FN)
func.func @multi(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s1: !irfuse.tensor<[], f32>, %s2: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = quant.fp8 %y, scale %s1 {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %b = quant.fp8 %y, scale %s2 {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %c = quant.fp8 %y, scale %s1 {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %a, %b, %c : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Dynamic per-token with a scale upper bound, and Gemma's (1 + w).
// CHECK-LABEL: func.func @per_token
// CHECK:       %[[Q:.+]], %[[SC:.+]] = fused.rms_norm_quant %{{.*}}, weight %{{.*}}, scale_ub %[[UB:.+]] {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, scheme = #quant.scheme<dynamic_token>}
// CHECK-SAME:  scale_out !irfuse.tensor<[s0, 1], f32>
// KERNEL-LABEL: func.func @per_token
// KERNEL:      "irfuse::rms_norm_quant_fp8_per_token.default"(%{{.*}}, %{{.*}}, %{{.*}}, 1.0e-06, 1.0, f8E4M3FN)
func.func @per_token(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %ub: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q, %sc = quant.fp8 %y, scale_ub %ub {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return %q, %sc : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>
}

// A per-token quant spelled `y * s.reciprocal()` (its `reciprocal`): the fused op and the kernel
// call keep it, so the kernel multiplies by 1 / s as the model does.
// CHECK-LABEL: func.func @per_token_reciprocal
// CHECK:       %[[Q:.+]], %[[SC:.+]], %[[R:.+]] = fused.rms_norm_quant %{{.*}}, residual %{{.*}}, weight %{{.*}} {eps = 1.000000e-06 : f64, scheme = #quant.scheme<dynamic_token>, reciprocal}
// KERNEL-LABEL: func.func @per_token_reciprocal
// KERNEL:      "irfuse::add_rms_norm_quant_fp8_per_token.default"(%{{.*}}, %{{.*}}, %{{.*}}, none, 1.0e-06, 0.0, f8E4M3FN, reciprocal = true)
func.func @per_token_reciprocal(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q, %sc = quant.fp8 %y {scheme = #quant.scheme<dynamic_token>, reciprocal} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return %q, %sc, %r : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], bf16>
}

// Per-group 64 with column-major UE8M0 scales, reached through the view(-1, H) of a linear:
// the fused op runs on the flattened input; the new residual is reshaped back.
// CHECK-LABEL: func.func @group_view
// CHECK:       %[[FX:.+]] = aten.call "aten::flatten.using_ints"(%{{.*}}, 0, 1)
// CHECK:       %[[FR:.+]] = aten.call "aten::flatten.using_ints"(%{{.*}}, 0, 1)
// CHECK:       %[[Q:.+]], %[[SC:.+]], %[[R:.+]] = fused.rms_norm_quant %[[FX]], residual %[[FR]], weight %{{.*}} {eps = 1.000000e-06 : f64, scheme = #quant.scheme<group 64, col_major, ue8m0>}
// CHECK:       %[[BACK:.+]] = aten.call "aten::reshape_as.default"(%[[R]], %{{.*}})
// CHECK:       func.return %[[Q]], %[[SC]], %[[BACK]]
// KERNEL-LABEL: func.func @group_view
// KERNEL:      "irfuse::add_rms_norm_quant_fp8_group.default"(%{{.*}}, %{{.*}}, %{{.*}}, 1.0e-06, 0.0, 64, true, true, f8E4M3FN)
func.func @group_view(%x: !irfuse.tensor<[2, s0, 128], bf16>, %res: !irfuse.tensor<[2, s0, 128], bf16>, %w: !irfuse.tensor<[128], bf16>) -> (!irfuse.tensor<["2*s0", 128], f8E4M3FN>, !irfuse.tensor<["2*s0", 2], f32>, !irfuse.tensor<[2, s0, 128], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[2, s0, 128], bf16>, !irfuse.tensor<[2, s0, 128], bf16>, !irfuse.tensor<[128], bf16>) -> (!irfuse.tensor<[2, s0, 128], bf16>, !irfuse.tensor<[2, s0, 128], bf16>)
  %v = aten.call "aten::view.default"(%y, [-1, 128]) : (!irfuse.tensor<[2, s0, 128], bf16>) -> !irfuse.tensor<["2*s0", 128], bf16>
  %q, %sc = quant.fp8 %v {scheme = #quant.scheme<group 64, col_major, ue8m0>} : (!irfuse.tensor<["2*s0", 128], bf16>) -> (!irfuse.tensor<["2*s0", 128], f8E4M3FN>, scale_out !irfuse.tensor<["2*s0", 2], f32>)
  func.return %q, %sc, %r : !irfuse.tensor<["2*s0", 128], f8E4M3FN>, !irfuse.tensor<["2*s0", 2], f32>, !irfuse.tensor<[2, s0, 128], bf16>
}

// Negative: the norm output has another, unquantized user.
// CHECK-LABEL: func.func @other_user
// CHECK:       norm.rms_norm
// CHECK:       quant.fp8
// CHECK-NOT:   fused.rms_norm_quant
func.func @other_user(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %y : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// Negative: a quant whose input is not the norm; a static and a dynamic quant on one norm.
// CHECK-LABEL: func.func @not_the_norm
// CHECK-NOT:   fused.rms_norm_quant
// CHECK:       func.return
func.func @not_the_norm(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %y : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// CHECK-LABEL: func.func @mixed_schemes
// CHECK-NOT:   fused.rms_norm_quant
// CHECK:       func.return
func.func @mixed_schemes(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %b, %bs = quant.fp8 %y {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return %a, %b : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Negative: dynamic per-tensor quant (its amax spans the whole tensor).
// CHECK-LABEL: func.func @dynamic_tensor
// CHECK-NOT:   fused.rms_norm_quant
// CHECK:       func.return
func.func @dynamic_tensor(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q, %qs = quant.fp8 %y {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[1], f32>)
  func.return %q : !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// A static quant spelled `y / s` (`divide`): the fused op and its kernel call keep the spelling.
// CHECK-LABEL: func.func @add_static_divide
// CHECK:       %[[Q:.+]], %[[R:.+]] = fused.rms_norm_quant %{{.*}}, residual %{{.*}}, weight %{{.*}}, scales [%{{.*}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>, divide}
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Q]], %[[R]]
// KERNEL-LABEL: func.func @add_static_divide
// KERNEL:      kernel.call impl "reference" tuple "irfuse::add_rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, [%{{.*}}], 1.0e-06, 0.0, f8E4M3FN, divide = true)
func.func @add_static_divide(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %r : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// Several dividing quants of one norm (q, k, v linears): identical ones merge, the rest share one
// dividing kernel.
// CHECK-LABEL: func.func @multi_divide
// CHECK:       %[[Q1:.+]], %[[Q2:.+]] = fused.rms_norm_quant %{{.*}}, weight %{{.*}}, scales [%{{.*}}, %{{.*}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>, divide}
// CHECK:       func.return %[[Q1]], %[[Q2]], %[[Q1]]
// KERNEL-LABEL: func.func @multi_divide
// KERNEL:      "irfuse::rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, [%{{.*}}, %{{.*}}], 1.0e-06, 0.0, f8E4M3FN, divide = true)
func.func @multi_divide(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s1: !irfuse.tensor<[], f32>, %s2: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = quant.fp8 %y, scale %s1 {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %b = quant.fp8 %y, scale %s2 {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %c = quant.fp8 %y, scale %s1 {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %a, %b, %c : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Negative: static quants of one norm spelled differently (one kernel rounds one way), even with
// one scale: the quants differ, so they do not merge either.
// CHECK-LABEL: func.func @mixed_divide
// CHECK:       norm.rms_norm
// CHECK:       quant.fp8 %{{.*}}, scale %{{.*}} {scheme = #quant.scheme<static_tensor>, divide}
// CHECK:       quant.fp8 %{{.*}}, scale %{{.*}} {scheme = #quant.scheme<static_tensor>} :
// CHECK-NOT:   fused.rms_norm_quant
// CHECK:       func.return
func.func @mixed_divide(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %b = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %a, %b : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// A residual norm that reads the rounded sum (`round_sum`: Hugging Face's bf16 add) keeps that
// reading through the fusion, with any scheme, and its kernel call passes `round_sum = true` (a
// keyword after `divide`); a norm without it (@add_static above) passes nothing.
// CHECK-LABEL: func.func @round_sum
// CHECK:       %[[Q1:.+]], %[[R1:.+]] = fused.rms_norm_quant %[[X:[^,]+]], residual %[[RES:[^,]+]], weight %[[W:[^,]+]], scales [%{{.*}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>, divide, round_sum} :
// CHECK:       %[[Q3:.+]], %[[S3:.+]], %[[R2:.+]] = fused.rms_norm_quant %[[X]], residual %[[R1]], weight %[[W]], scale_ub %{{.*}} {eps = 1.000000e-06 : f64, scheme = #quant.scheme<dynamic_token>, round_sum} :
// CHECK:       %[[Q4:.+]], %[[S4:.+]], %[[R3:.+]] = fused.rms_norm_quant %[[X]], residual %[[R2]], weight %[[W]] {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, scheme = #quant.scheme<group 64, col_major>, round_sum} :
// CHECK-NOT:   norm.add_rms_norm
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Q1]], %[[Q3]], %[[S3]], %[[Q4]], %[[S4]], %[[R3]]
// KERNEL-LABEL: func.func @round_sum
// KERNEL:      "irfuse::add_rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, [%{{.*}}], 1.0e-06, 0.0, f8E4M3FN, divide = true, round_sum = true)
// KERNEL:      "irfuse::add_rms_norm_quant_fp8_per_token.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 1.0e-06, 0.0, f8E4M3FN, round_sum = true)
// KERNEL:      "irfuse::add_rms_norm_quant_fp8_group.default"(%{{.*}}, %{{.*}}, %{{.*}}, 1.0e-06, 1.0, 64, true, false, f8E4M3FN, round_sum = true)
func.func @round_sum(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s1: !irfuse.tensor<[], f32>, %ub: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], bf16>) {
  %y1, %r1 = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %a = quant.fp8 %y1, scale %s1 {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %y2, %r2 = norm.add_rms_norm %x, %r1, weight %w {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %c, %cs = quant.fp8 %y2, scale_ub %ub {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  %y3, %r3 = norm.add_rms_norm %x, %r2, weight %w {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %d, %ds = quant.fp8 %y3 {scheme = #quant.scheme<group 64, col_major>} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  func.return %a, %c, %cs, %d, %ds, %r3 : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[s0, 64], bf16>
}

// The weight product in float32, rounded once (F.rms_norm, read off the decomposition): the fused
// op and the kernel call carry `weight_f32`, so the kernel rounds as the model does.
// CHECK-LABEL: func.func @weight_f32
// CHECK:       fused.rms_norm_quant %{{.*}}, weight %{{.*}}, scales [%{{.*}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>, weight_f32}
// KERNEL-LABEL: func.func @weight_f32
// KERNEL:      "irfuse::rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, [%{{.*}}], 1.0e-06, 0.0, f8E4M3FN, weight_f32 = true)
func.func @weight_f32(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  ^bb0(%dx: !irfuse.tensor<[s0, 64], bf16>, %dw: !irfuse.tensor<[64], bf16>):
    %n = aten.call "aten::rms_norm.default"(%dx, [64], %dw, 1.0e-06) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %n : !irfuse.tensor<[s0, 64], bf16>
  }
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q : !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Mixed schemes in one graph, on two norms: each site is judged by its own scheme. The dynamic per-tensor site
// first stays (a remark), the static site after it fuses.
// CHECK-LABEL: func.func @mixed_sites
// CHECK:       quant.fp8 %{{.*}} {scheme = #quant.scheme<dynamic_tensor>}
// CHECK:       fused.rms_norm_quant %{{.*}}, weight %{{.*}}, scales [%{{.*}}] {eps = 1.000000e-06 : f64, scheme = #quant.scheme<static_tensor>}
func.func @mixed_sites(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>) {
  %y1 = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q1, %s1 = quant.fp8 %y1 {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, scale_out !irfuse.tensor<[1], f32>)
  %y2 = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %q2 = quant.fp8 %y2, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q1, %s1, %q2 : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[s0, 64], f8E4M3FN>
}

// Negative: the new residual is read as the float32 sum (vLLM's form where nothing rounds it);
// the kernels write the new residual in the input's dtype.
// CHECK-LABEL: func.func @f32_residual_read
// CHECK-NOT:   fused.rms_norm_quant
// CHECK:       func.return
func.func @f32_residual_read(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f32>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], f32>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %r : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], f32>
}
