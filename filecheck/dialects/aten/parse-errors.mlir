// RUN: not irfuse-opt %s 2>&1 | filecheck %s

// Bad IR is a parse error naming the file, line and column, with a non-zero status.
// CHECK: irfuse-opt: parse error: {{.*}}parse-errors.mlir:[[# @LINE + 2]]:{{[0-9]+}}
// CHECK: expected a dimension: an integer, a symbol or a quoted expression
func.func @neg_dim(%x: !irfuse.tensor<[-3], f32>) {
  func.return
}
