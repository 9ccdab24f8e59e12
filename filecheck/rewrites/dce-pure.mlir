// RUN: irfuse-opt %s -p dce-pure | filecheck %s

// After a fusion the model's gather of the tables at the three position rows, and its halves,
// are read by nothing: they go, last first. A random op, a call with undefined contents, an
// in-place write and a collective nothing reads stay (they draw numbers, or may write); so does
// what the graph returns.
// CHECK-LABEL: func.func @unread
// CHECK-NOT:   aten::index.Tensor
// CHECK-NOT:   aten::split.Tensor
// CHECK:       "aten::rand_like.default"
// CHECK-NEXT:  "aten::empty_like.default"
// CHECK-NEXT:  "aten::copy_.default"
// CHECK-NEXT:  "_c10d_functional::all_reduce.default"
// CHECK-NEXT:  %[[Y:.+]] = aten.call "aten::mul.Tensor"
// CHECK-NEXT:  func.return %[[Y]]
func.func @unread(%cache: !irfuse.tensor<[64, 16], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %x: !irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32> {
  %g = aten.call "aten::index.Tensor"(%cache, [%pos]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[3, s0], i64>) -> !irfuse.tensor<[3, s0, 16], bf16>
  %c, %s = aten.call tuple "aten::split.Tensor"(%g, 8, -1) : (!irfuse.tensor<[3, s0, 16], bf16>) -> (!irfuse.tensor<[3, s0, 8], bf16>, !irfuse.tensor<[3, s0, 8], bf16>)
  %r = aten.call "aten::rand_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %e = aten.call "aten::empty_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %w = aten.call "aten::copy_.default"(%x, %x) : (!irfuse.tensor<[4, 8], f32>, !irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %a = aten.call "_c10d_functional::all_reduce.default"(%x, "sum", "0") : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %y = aten.call "aten::mul.Tensor"(%x, 2) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  func.return %y : !irfuse.tensor<[4, 8], f32>
}
