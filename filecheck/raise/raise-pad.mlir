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

// buf = x.new_zeros(T, 3072); buf[..., :2880] = x: the write through slice + copy, as
// aot_autograd functionalizes it; T symbolic.
// CHECK-LABEL: func.func @new_zeros_assign
// CHECK-SAME: (%[[T:.+]]: !irfuse.sym<s0>, %[[X:.+]]: !irfuse.tensor<[s0, 2880], bf16>)
// CHECK: %[[P:.+]] = act.pad %[[X]] {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 2880], bf16>):
// CHECK-NEXT: %[[B:.+]] = aten.call "aten::new_zeros.default"(%[[A]], [%[[T]], 3072]
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::slice.Tensor"(%[[B]], 1, 0, 2880)
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::copy.default"(%[[S]], %[[A]])
// CHECK-NEXT: %[[W:.+]] = aten.call "aten::slice_scatter.default"(%[[B]], %[[C]], 1, 0, 2880)
// CHECK-NEXT: irfuse.yield %[[W]]
// CHECK: func.return %[[P]]
func.func @new_zeros_assign(%t: !irfuse.sym<s0>, %x: !irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16> {
  %b = aten.call "aten::new_zeros.default"(%x, [%t, 3072], pin_memory = false) : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 3072], bf16>
  %s = aten.call "aten::slice.Tensor"(%b, 1, 0, 2880) : (!irfuse.tensor<[s0, 3072], bf16>) -> !irfuse.tensor<[s0, 2880], bf16>
  %c = aten.call "aten::copy.default"(%s, %x) : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2880], bf16>
  %w = aten.call "aten::slice_scatter.default"(%b, %c, 1, 0, 2880) : (!irfuse.tensor<[s0, 3072], bf16>, !irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
  func.return %w : !irfuse.tensor<[s0, 3072], bf16>
}

// torch.slice_scatter(zeros, x, -1, 8) straight: low 8, the end clamped to the size.
// CHECK-LABEL: func.func @slice_scatter_low
// CHECK: act.pad %{{.+}} {low = 8 : i64, high = 24 : i64} : (!irfuse.tensor<[4, 32], f16>) -> !irfuse.tensor<[4, 64], f16>
func.func @slice_scatter_low(%x: !irfuse.tensor<[4, 32], f16>) -> !irfuse.tensor<[4, 64], f16> {
  %b = aten.call "aten::zeros.default"([4, 64], dtype = f16, pin_memory = false) : () -> !irfuse.tensor<[4, 64], f16>
  %w = aten.call "aten::slice_scatter.default"(%b, %x, -1, 8, 40) : (!irfuse.tensor<[4, 64], f16>, !irfuse.tensor<[4, 32], f16>) -> !irfuse.tensor<[4, 64], f16>
  func.return %w : !irfuse.tensor<[4, 64], f16>
}

// buf = torch.full((4, 64), -1.0); buf[:, :40] = x: the full slice of dim 0 and its scatter
// back join the region; the fill value is the pad value.
// CHECK-LABEL: func.func @full_rows_slice
// CHECK: %[[P:.+]] = act.pad %{{.+}} {low = 0 : i64, high = 24 : i64, value = -1.000000e+00 : f64} : (!irfuse.tensor<[4, 40], bf16>) -> !irfuse.tensor<[4, 64], bf16>
// CHECK: aten::slice_scatter.default"(%{{.+}}, %{{.+}}, 0, 0, 9223372036854775807)
// CHECK-NEXT: irfuse.yield
// CHECK: func.return %[[P]]
func.func @full_rows_slice(%x: !irfuse.tensor<[4, 40], bf16>) -> !irfuse.tensor<[4, 64], bf16> {
  %b = aten.call "aten::full.default"([4, 64], -1.0, dtype = bf16, pin_memory = false) : () -> !irfuse.tensor<[4, 64], bf16>
  %r = aten.call "aten::slice.Tensor"(%b, 0, 0, 9223372036854775807) : (!irfuse.tensor<[4, 64], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  %s = aten.call "aten::slice.Tensor"(%r, 1, 0, 40) : (!irfuse.tensor<[4, 64], bf16>) -> !irfuse.tensor<[4, 40], bf16>
  %c = aten.call "aten::copy.default"(%s, %x) : (!irfuse.tensor<[4, 40], bf16>, !irfuse.tensor<[4, 40], bf16>) -> !irfuse.tensor<[4, 40], bf16>
  %w = aten.call "aten::slice_scatter.default"(%r, %c, 1, 0, 40) : (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[4, 40], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  %o = aten.call "aten::slice_scatter.default"(%b, %w, 0, 0, 9223372036854775807) : (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[4, 64], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  func.return %o : !irfuse.tensor<[4, 64], bf16>
}

// cat([x, x.new_zeros(T, 64)], -1).
// CHECK-LABEL: func.func @cat_zeros
// CHECK-SAME: (%[[T:.+]]: !irfuse.sym<s0>, %[[X:.+]]: !irfuse.tensor<[s0, 2880], bf16>)
// CHECK: %[[P:.+]] = act.pad %[[X]] {low = 0 : i64, high = 64 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 2880], bf16>):
// CHECK-NEXT: %[[Z:.+]] = aten.call "aten::new_zeros.default"(%[[A]], [%[[T]], 64]
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::cat.default"([%[[A]], %[[Z]]], -1)
// CHECK-NEXT: irfuse.yield %[[C]]
// CHECK: func.return %[[P]]
func.func @cat_zeros(%t: !irfuse.sym<s0>, %x: !irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2944], bf16> {
  %z = aten.call "aten::new_zeros.default"(%x, [%t, 64], pin_memory = false) : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  %c = aten.call "aten::cat.default"([%x, %z], -1) : (!irfuse.tensor<[s0, 2880], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 2944], bf16>
  func.return %c : !irfuse.tensor<[s0, 2944], bf16>
}

// Constants on both sides, one value (full 0 and zeros), dim given positive.
// CHECK-LABEL: func.func @cat_both_sides
// CHECK: act.pad %{{.+}} {low = 3 : i64, high = 5 : i64} : (!irfuse.tensor<[2, 4, 8], f32>) -> !irfuse.tensor<[2, 4, 16], f32>
func.func @cat_both_sides(%x: !irfuse.tensor<[2, 4, 8], f32>) -> !irfuse.tensor<[2, 4, 16], f32> {
  %a = aten.call "aten::full.default"([2, 4, 3], 0, dtype = f32, pin_memory = false) : () -> !irfuse.tensor<[2, 4, 3], f32>
  %b = aten.call "aten::zeros.default"([2, 4, 5], dtype = f32, pin_memory = false) : () -> !irfuse.tensor<[2, 4, 5], f32>
  %c = aten.call "aten::cat.default"([%a, %x, %b], 2) : (!irfuse.tensor<[2, 4, 3], f32>, !irfuse.tensor<[2, 4, 8], f32>, !irfuse.tensor<[2, 4, 5], f32>) -> !irfuse.tensor<[2, 4, 16], f32>
  func.return %c : !irfuse.tensor<[2, 4, 16], f32>
}

// Negative: pieces assembled into a new zero tensor (MLA's key [k_nope | k_pe]): no pad.
// CHECK-LABEL: func.func @assembled_pieces
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @assembled_pieces(%a: !irfuse.tensor<[4, 2, 16], bf16>, %b: !irfuse.tensor<[4, 2, 8], bf16>) -> !irfuse.tensor<[4, 2, 24], bf16> {
  %z = aten.call "aten::new_zeros.default"(%a, [4, 2, 24], pin_memory = false) : (!irfuse.tensor<[4, 2, 16], bf16>) -> !irfuse.tensor<[4, 2, 24], bf16>
  %w = aten.call "aten::slice_scatter.default"(%z, %a, -1, 0, 16) : (!irfuse.tensor<[4, 2, 24], bf16>, !irfuse.tensor<[4, 2, 16], bf16>) -> !irfuse.tensor<[4, 2, 24], bf16>
  %v = aten.call "aten::slice_scatter.default"(%w, %b, -1, 16, 24) : (!irfuse.tensor<[4, 2, 24], bf16>, !irfuse.tensor<[4, 2, 8], bf16>) -> !irfuse.tensor<[4, 2, 24], bf16>
  func.return %v : !irfuse.tensor<[4, 2, 24], bf16>
}

// Negative: the copy casts f32 x into the bf16 buffer (a pad keeps x's dtype).
// CHECK-LABEL: func.func @casting_copy
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @casting_copy(%x: !irfuse.tensor<[4, 40], f32>) -> !irfuse.tensor<[4, 64], bf16> {
  %b = aten.call "aten::zeros.default"([4, 64], dtype = bf16, pin_memory = false) : () -> !irfuse.tensor<[4, 64], bf16>
  %s = aten.call "aten::slice.Tensor"(%b, 1, 0, 40) : (!irfuse.tensor<[4, 64], bf16>) -> !irfuse.tensor<[4, 40], bf16>
  %c = aten.call "aten::copy.default"(%s, %x) : (!irfuse.tensor<[4, 40], bf16>, !irfuse.tensor<[4, 40], f32>) -> !irfuse.tensor<[4, 40], bf16>
  %w = aten.call "aten::slice_scatter.default"(%b, %c, 1, 0, 40) : (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[4, 40], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  func.return %w : !irfuse.tensor<[4, 64], bf16>
}

// Negative: rows appended (cat along dim 0), and constants of two values.
// CHECK-LABEL: func.func @cat_not_a_pad
// CHECK-NOT: act.pad
// CHECK: func.return
func.func @cat_not_a_pad(%x: !irfuse.tensor<[4, 8], bf16>) -> (!irfuse.tensor<[6, 8], bf16>, !irfuse.tensor<[4, 12], bf16>) {
  %z = aten.call "aten::zeros.default"([2, 8], dtype = bf16, pin_memory = false) : () -> !irfuse.tensor<[2, 8], bf16>
  %c = aten.call "aten::cat.default"([%x, %z], 0) : (!irfuse.tensor<[4, 8], bf16>, !irfuse.tensor<[2, 8], bf16>) -> !irfuse.tensor<[6, 8], bf16>
  %a = aten.call "aten::zeros.default"([4, 2], dtype = bf16, pin_memory = false) : () -> !irfuse.tensor<[4, 2], bf16>
  %o = aten.call "aten::full.default"([4, 2], 1.0, dtype = bf16, pin_memory = false) : () -> !irfuse.tensor<[4, 2], bf16>
  %d = aten.call "aten::cat.default"([%a, %x, %o], -1) : (!irfuse.tensor<[4, 2], bf16>, !irfuse.tensor<[4, 8], bf16>, !irfuse.tensor<[4, 2], bf16>) -> !irfuse.tensor<[4, 12], bf16>
  func.return %c, %d : !irfuse.tensor<[6, 8], bf16>, !irfuse.tensor<[4, 12], bf16>
}
