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

// vLLM's no-op test: a chain of reshapes collapses to one (a view of views stays a view; with a
// reshape in the chain the merged op is a reshape), and a chain that ends where it began goes.
// CHECK-LABEL: func.func @chains
// CHECK-SAME:  (%[[X:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[S:.+]]: !irfuse.sym<s0>)
// CHECK-NEXT:  %[[V:.+]] = aten.call "aten::view.default"(%[[X]], [%[[S]], 2, 32])
// CHECK-NEXT:  %[[R:.+]] = aten.call "aten::reshape.default"(%[[X]], [%[[S]], 4, 16])
// CHECK-NEXT:  %[[N:.+]] = aten.call "aten::neg.default"(%[[X]])
// CHECK-NEXT:  func.return %[[V]], %[[R]], %[[N]]
func.func @chains(%x: !irfuse.tensor<[s0, 64], bf16>, %s: !irfuse.sym<s0>) -> (!irfuse.tensor<[s0, 2, 32], bf16>, !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = aten.call "aten::view.default"(%x, [%s, 8, 8]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 8, 8], bf16>
  %b = aten.call "aten::view.default"(%a, [%s, 2, 32]) : (!irfuse.tensor<[s0, 8, 8], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 2, 32], bf16>
  %c = aten.call "aten::reshape.default"(%x, [%s, 16, 4]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 16, 4], bf16>
  %d = aten.call "aten::view.default"(%c, [%s, 4, 16]) : (!irfuse.tensor<[s0, 16, 4], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 4, 16], bf16>
  %e = aten.call "aten::view.default"(%x, [%s, 4, 16]) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 4, 16], bf16>
  %f = aten.call "aten::view.default"(%e, [%s, 64]) : (!irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  %n = aten.call "aten::neg.default"(%f) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %b, %d, %n : !irfuse.tensor<[s0, 2, 32], bf16>, !irfuse.tensor<[s0, 4, 16], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// A slice whose end is the symbolic length of its dim (`b[0:b.shape[0]]`) keeps all of it.
// CHECK-LABEL: func.func @symbolic_end
// CHECK-SAME:  (%[[X:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[S:.+]]: !irfuse.sym<s0>)
// CHECK-NEXT:  %[[N:.+]] = aten.call "aten::neg.default"(%[[X]])
// CHECK-NEXT:  %[[P:.+]] = aten.call "aten::slice.Tensor"(%[[N]], 0, 0, %[[S]])
// CHECK-NEXT:  func.return %[[P]]
func.func @symbolic_end(%x: !irfuse.tensor<[s0, 64], bf16>, %s: !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16> {
  %a = aten.call "aten::slice.Tensor"(%x, 0, 0, %s) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  %n = aten.call "aten::neg.default"(%a) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %p = aten.call "aten::slice.Tensor"(%n, 0, 0, %s) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %p : !irfuse.tensor<[s0, 64], bf16>
}

// vLLM's rotary concatenates the rotated head with its empty pass-through part when it rotates
// the whole head: the cat is the rotated tensor, and the empty slice goes with it. A cat of two
// real parts stays.
// CHECK-LABEL: func.func @empty_cat
// CHECK-SAME:  (%[[X:.+]]: !irfuse.tensor<[s0, 4, 64], bf16>)
// CHECK-NEXT:  %[[N:.+]] = aten.call "aten::neg.default"(%[[X]])
// CHECK-NEXT:  %[[M:.+]] = aten.call "aten::neg.default"(%[[N]])
// CHECK-NEXT:  %[[C:.+]] = aten.call "aten::cat.default"([%[[N]], %[[N]]], -1)
// CHECK-NEXT:  func.return %[[M]], %[[C]]
func.func @empty_cat(%x: !irfuse.tensor<[s0, 4, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 128], bf16>) {
  %n = aten.call "aten::neg.default"(%x) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %pass = aten.call "aten::slice.Tensor"(%x, 2, 64, 9223372036854775807) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 4, 0], bf16>
  %c = aten.call "aten::cat.default"([%n, %pass], -1) : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 0], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %m = aten.call "aten::neg.default"(%c) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %two = aten.call "aten::cat.default"([%n, %n], -1) : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 4, 128], bf16>
  func.return %m, %two : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 128], bf16>
}

// A detach and a view to the tensor's own dtype (vLLM's vocab-parallel embedding returns
// `output.view(dtype)` after its all-reduce) read their input; a view to another dtype stays.
// CHECK-LABEL: func.func @same_value
// CHECK:       %[[N:.+]] = aten.call "aten::neg.default"(%x)
// CHECK:       %[[B:.+]] = aten.call "aten::view.dtype"(%[[N]], i16)
// CHECK:       func.return %[[B]]
func.func @same_value(%x: !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], i16> {
  %v = aten.call "aten::view.dtype"(%x, bf16) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %d = aten.call "aten::detach.default"(%v) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %n = aten.call "aten::neg.default"(%d) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %b = aten.call "aten::view.dtype"(%n, i16) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], i16>
  func.return %b : !irfuse.tensor<[s0, 64], i16>
}
