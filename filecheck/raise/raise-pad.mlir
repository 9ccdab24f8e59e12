// RUN: irfuse-opt %s -p raise-pad | filecheck %s

// F.pad(x, (0, 64)): the lm_head input padded to a multiple of 128.
// CHECK-LABEL: func.func @pad_high
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 2880], bf16>)
// CHECK: %[[P:.+]] = act.pad %[[X]] {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 2880], bf16>):
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::constant_pad_nd.default"(%[[A]], [0, 192], 0.0)
// CHECK-NEXT: irfuse.yield %[[C]]
// CHECK: func.return %[[P]]
func.func @pad_high(%x: !irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16> {
  %p = aten.call "aten::constant_pad_nd.default"(%x, [0, 192], 0.0) : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
  func.return %p : !irfuse.tensor<[s0, 3072], bf16>
}

// Both sides, a value kept, zero amounts on the dim before (pads nothing there).
// CHECK-LABEL: func.func @pad_low_high_value
// CHECK: act.pad %{{.+}} {low = 2 : i64, high = 3 : i64, value = -1.000000e+00 : f64} : (!irfuse.tensor<[4, 6, 10], f32>) -> !irfuse.tensor<[4, 6, 15], f32>
func.func @pad_low_high_value(%x: !irfuse.tensor<[4, 6, 10], f32>) -> !irfuse.tensor<[4, 6, 15], f32> {
  %p = aten.call "aten::constant_pad_nd.default"(%x, [2, 3, 0, 0], -1.0) : (!irfuse.tensor<[4, 6, 10], f32>) -> !irfuse.tensor<[4, 6, 15], f32>
  func.return %p : !irfuse.tensor<[4, 6, 15], f32>
}

// The composite aten.pad in constant mode, default value.
// CHECK-LABEL: func.func @aten_pad
// CHECK: act.pad %{{.+}} {low = 0 : i64, high = 16 : i64} : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
func.func @aten_pad(%x: !irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16> {
  %p = aten.call "aten::pad.default"(%x, [0, 16], "constant", none) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  func.return %p : !irfuse.tensor<[s0, 4, 48], bf16>
}

// Negative: pads dim -2.
// CHECK-LABEL: func.func @pad_other_dim
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @pad_other_dim(%x: !irfuse.tensor<[4, 6, 10], f32>) -> !irfuse.tensor<[4, 8, 10], f32> {
  %p = aten.call "aten::constant_pad_nd.default"(%x, [0, 0, 1, 1], 0.0) : (!irfuse.tensor<[4, 6, 10], f32>) -> !irfuse.tensor<[4, 8, 10], f32>
  func.return %p : !irfuse.tensor<[4, 8, 10], f32>
}

// Negative: negative amounts crop.
// CHECK-LABEL: func.func @crop
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @crop(%x: !irfuse.tensor<[4, 10], f32>) -> !irfuse.tensor<[4, 8], f32> {
  %p = aten.call "aten::constant_pad_nd.default"(%x, [0, -2], 0.0) : (!irfuse.tensor<[4, 10], f32>) -> !irfuse.tensor<[4, 8], f32>
  func.return %p : !irfuse.tensor<[4, 8], f32>
}

// Negative: reflect padding is not a constant pad.
// CHECK-LABEL: func.func @reflect
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @reflect(%x: !irfuse.tensor<[4, 10], f32>) -> !irfuse.tensor<[4, 12], f32> {
  %p = aten.call "aten::pad.default"(%x, [1, 1], "reflect", none) : (!irfuse.tensor<[4, 10], f32>) -> !irfuse.tensor<[4, 12], f32>
  func.return %p : !irfuse.tensor<[4, 12], f32>
}
