// RUN: irfuse-opt %s -p eliminate-noops | filecheck %s

// CHECK-LABEL: func.func @noops
// CHECK-SAME:  (%[[X:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[S:.+]]: !irfuse.sym<s0>, %[[Y:.+]]: !irfuse.tensor<[s0, 64], bf16>)
// CHECK-NOT:   aten::view.default
// CHECK-NOT:   aten::slice.Tensor"(%[[X]], 1, 0, 9223372036854775807)
// CHECK:       %[[N:.+]] = aten.call "aten::neg.default"(%[[X]])
// CHECK:       %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[N]], %[[X]])
// CHECK:       %[[A:.+]] = aten.call "aten::add.Tensor"(%[[M]], %[[Y]])
// A slice that keeps part of the dim, a reshape that changes the shape, and a returned view stay.
// CHECK:       aten.call "aten::slice.Tensor"(%{{.*}}, 1, 0, 32)
// CHECK:       aten.call "aten::view.default"(%{{.*}}, [%[[S]], 2, 32])
// CHECK:       %[[R:.+]] = aten.call "aten::view.default"(%[[A]], [%[[S]], 64])
// CHECK:       func.return %[[R]]
func.func @noops(%x: !irfuse.tensor<[s0, 64], bf16>, %s0: !irfuse.sym<s0>, %y: !irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 2, 32], bf16>) {
  %v = aten.call "aten::view.default"(%x, [%s0, 64]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  %n = aten.call "aten::neg.default"(%v) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %f = aten.call "aten::slice.Tensor"(%x, 1, 0, 9223372036854775807) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %m = aten.call "aten::mul.Tensor"(%n, %f) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %sc = aten.call "aten::slice_scatter.default"(%x, %y, 1, 0, 64) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = aten.call "aten::add.Tensor"(%m, %sc) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %half = aten.call "aten::slice.Tensor"(%a, 1, 0, 32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  %h = aten.call "aten::view.default"(%a, [%s0, 2, 32]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 2, 32], bf16>
  %r = aten.call "aten::view.default"(%a, [%s0, 64]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %r, %half, %h : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 2, 32], bf16>
}
