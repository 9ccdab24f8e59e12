// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

// An operand must appear in the argument list exactly once: the generic form can say otherwise.
func.func @dangling(%x: !irfuse.tensor<[8], f32>) {
  "aten.call"(%x, %x) <{target = "aten::neg.default", template = [#aten.operand<0>]}> : (!irfuse.tensor<[8], f32>, !irfuse.tensor<[8], f32>) -> ()
  func.return
}
// CHECK: every operand of aten.call must appear once in its arguments

// -----

func.func @out_of_range(%x: !irfuse.tensor<[8], f32>) {
  "aten.call"(%x) <{target = "aten::neg.default", template = [#aten.operand<3>]}> : (!irfuse.tensor<[8], f32>) -> ()
  func.return
}
// CHECK: template refers to operand 3 out of range

// -----

func.func @bad_kernel(%x: !irfuse.tensor<[8], f32>) {
  %y = kernel.call impl "triton" "aten::neg.default"(%x) : (!irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32>
  func.return
}
// CHECK: kernel.call must call an irfuse custom op, got 'aten::neg.default'

// -----

func.func @bad_impl(%x: !irfuse.tensor<[8], f32>) {
  %y = kernel.call impl "magic" "irfuse::silu_mul.default"(%x) : (!irfuse.tensor<[8], f32>) -> !irfuse.tensor<[4], f32>
  func.return
}
// CHECK: unknown kernel implementation 'magic'
