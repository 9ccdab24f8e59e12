// RUN: irfuse-opt %s -p fuse-act-padding | filecheck %s
// RUN: irfuse-opt %s -p fuse-act-padding,select-kernels | filecheck %s --check-prefix=KERNEL

// Residual add + RMSNorm -> zero pad of hidden 2880 to a multiple of 256 (GPT-OSS): one op, the
// pad's amounts and the norm's eps and round_sum as attributes.
// CHECK-LABEL: func.func @add_norm_pad
// CHECK:       %[[P:.+]], %[[R:.+]] = fused.rms_norm_pad %{{.*}}, residual %{{.*}}, %{{[^ ]+}} {eps = 1.000000e-05 : f64, low = 0 : i64, high = 192 : i64, round_sum} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 3072], bf16>, residual_out !irfuse.tensor<[s0, 2880], bf16>)
// CHECK-NOT:   norm.add_rms_norm
// CHECK-NOT:   act.pad
// CHECK:       func.return %[[P]], %[[R]]
// KERNEL-LABEL: func.func @add_norm_pad
// KERNEL:      kernel.call impl "reference" tuple "irfuse::add_rms_norm_pad.default"(%{{.*}}, %{{.*}}, %{{.*}}, 1.0e-05, 0, 192, 0.0, 0.0, round_sum = true)
func.func @add_norm_pad(%x: !irfuse.tensor<[s0, 2880], bf16>, %res: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 3072], bf16>, !irfuse.tensor<[s0, 2880], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-05 : f64, round_sum} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>)
  %p = act.pad %y {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
  func.return %p, %r : !irfuse.tensor<[s0, 3072], bf16>, !irfuse.tensor<[s0, 2880], bf16>
}

// A norm without the residual, padded on both sides with a constant: any amounts, any value.
// CHECK-LABEL: func.func @norm_pad_both_sides
// CHECK:       %[[P:.+]] = fused.rms_norm_pad %{{.*}}, %{{[^ ]+}} {eps = 1.000000e-06 : f64, low = 8 : i64, high = 64 : i64, value = -1.000000e+00 : f64} : (!irfuse.tensor<[s0, 3000], f16>, !irfuse.tensor<[3000], f16>) -> !irfuse.tensor<[s0, 3072], f16>
// CHECK:       func.return %[[P]]
// KERNEL-LABEL: func.func @norm_pad_both_sides
// KERNEL:      kernel.call impl "reference" "irfuse::rms_norm_pad.default"(%{{.*}}, %{{.*}}, 1.0e-06, 8, 64, -1.0, 0.0)
func.func @norm_pad_both_sides(%x: !irfuse.tensor<[s0, 3000], f16>, %w: !irfuse.tensor<[3000], f16>) -> !irfuse.tensor<[s0, 3072], f16> {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 3000], f16>, !irfuse.tensor<[3000], f16>) -> !irfuse.tensor<[s0, 3000], f16>
  %p = act.pad %y {low = 8 : i64, high = 64 : i64, value = -1.0 : f64} : (!irfuse.tensor<[s0, 3000], f16>) -> !irfuse.tensor<[s0, 3072], f16>
  func.return %p : !irfuse.tensor<[s0, 3072], f16>
}

// The norm also feeds the router GEMM: it reads the norm back as a slice of the padded rows.
// CHECK-LABEL: func.func @router_reads_slice
// CHECK:       %[[P:.+]], %[[R:.+]] = fused.rms_norm_pad
// CHECK:       %[[S:.+]] = aten.call "aten::slice.Tensor"(%[[P]], 1, 0, 2880) : (!irfuse.tensor<[s0, 2944], bf16>) -> !irfuse.tensor<[s0, 2880], bf16>
// CHECK:       gemm.matmul %[[S]], %{{.*}}
// CHECK:       func.return %[[P]], %[[R]]
func.func @router_reads_slice(%x: !irfuse.tensor<[s0, 2880], bf16>, %res: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>, %rw: !irfuse.tensor<[2880, 32], bf16>) -> (!irfuse.tensor<[s0, 2944], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 32], bf16>) {
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>)
  %logits = gemm.matmul %y, %rw : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  %p = act.pad %y {low = 0 : i64, high = 64 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16>
  func.return %p, %r, %logits : !irfuse.tensor<[s0, 2944], bf16>, !irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 32], bf16>
}

// Gemma's `1 + w` carries its offset, and the kernel multiplies in float32.
// CHECK-LABEL: func.func @offset
// CHECK:       fused.rms_norm_pad %{{.*}}, %{{[^ ]+}} {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, low = 0 : i64, high = 64 : i64, weight_f32}
func.func @offset(%x: !irfuse.tensor<[s0, 2880], bf16>, %w: !irfuse.tensor<[2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16> {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[2880], bf16>) -> !irfuse.tensor<[s0, 2880], bf16>
  %p = act.pad %y {low = 0 : i64, high = 64 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16>
  func.return %p : !irfuse.tensor<[s0, 2944], bf16>
}

// Negatives: the norm output also returned unpadded; padded two ways; a norm without a weight.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.rms_norm_pad
// CHECK:       func.return
func.func @negatives(%x: !irfuse.tensor<[s0, 40], bf16>, %w: !irfuse.tensor<[40], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 40], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 48], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 40], bf16>, !irfuse.tensor<[40], bf16>) -> !irfuse.tensor<[s0, 40], bf16>
  %p = act.pad %y {low = 0 : i64, high = 24 : i64} : (!irfuse.tensor<[s0, 40], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y2 = norm.rms_norm %x, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 40], bf16>, !irfuse.tensor<[40], bf16>) -> !irfuse.tensor<[s0, 40], bf16>
  %p2 = act.pad %y2 {low = 0 : i64, high = 24 : i64} : (!irfuse.tensor<[s0, 40], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %p3 = act.pad %y2 {low = 0 : i64, high = 8 : i64} : (!irfuse.tensor<[s0, 40], bf16>) -> !irfuse.tensor<[s0, 48], bf16>
  %y3 = norm.rms_norm %x {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 40], bf16>) -> !irfuse.tensor<[s0, 40], bf16>
  %p4 = act.pad %y3 {low = 0 : i64, high = 24 : i64} : (!irfuse.tensor<[s0, 40], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %p, %y, %p2, %p3, %p4 : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 40], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 48], bf16>, !irfuse.tensor<[s0, 64], bf16>
}
