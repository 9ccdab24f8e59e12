// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @int_x(%x: !irfuse.tensor<[8, 64], i64>) {
  %y = norm.rms_norm %x {eps = 1.0e-06 : f64} : (!irfuse.tensor<[8, 64], i64>) -> !irfuse.tensor<[8, 64], i64>
  func.return
}
// CHECK: x must have a float dtype (f16, bf16, f32, f64), got i64

// -----

func.func @weight_size(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[2048], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[2048], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  func.return
}
// CHECK: weight has shape [2048] but x's last dim is 4096

// -----

// Two different symbols cannot be shown equal.
func.func @weight_symbol(%x: !irfuse.tensor<[s0, s1], bf16>, %w: !irfuse.tensor<[s2], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, s1], bf16>, !irfuse.tensor<[s2], bf16>) -> !irfuse.tensor<[s0, s1], bf16>
  func.return
}
// CHECK: weight has shape [s2] but x's last dim is s1

// -----

func.func @weight_rank(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[1, 64], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return
}
// CHECK: weight must have rank 1, got [1, 64]

// -----

func.func @y_shape(%x: !irfuse.tensor<[s0, 64], bf16>) {
  %y = norm.rms_norm %x {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s1, 64], bf16>
  func.return
}
// CHECK: y has shape [s1, 64], expected [s0, 64]

// -----

func.func @y_dtype(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) {
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], i32>
  func.return
}
// CHECK: y must have a float dtype

// -----

func.func @eps(%x: !irfuse.tensor<[s0, 64], bf16>) {
  %y = norm.rms_norm %x {eps = -1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return
}
// CHECK: eps must be a finite value >= 0, got -1e-06

// -----

func.func @residual_shape(%x: !irfuse.tensor<[s0, 64], bf16>, %r: !irfuse.tensor<[s0, 32], bf16>) {
  %y, %ro = norm.add_rms_norm %x, %r {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  func.return
}
// CHECK: residual has shape [s0, 32], expected [s0, 64]

// -----

func.func @residual_out_dtype(%x: !irfuse.tensor<[s0, 64], bf16>, %r: !irfuse.tensor<[s0, 64], bf16>) {
  %y, %ro = norm.add_rms_norm %x, %r {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], i64>)
  func.return
}
// CHECK: residual_out must have a float dtype

// -----

func.func @region_args(%x: !irfuse.tensor<[s0, 64], f32>) {
  %y = norm.rms_norm %x {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], bf16>):
    irfuse.yield %a : !irfuse.tensor<[s0, 64], bf16>
  }
  func.return
}
// CHECK: decomposition block arguments (!irfuse.tensor<[s0, 64], bf16>) must match the operands (!irfuse.tensor<[s0, 64], f32>)

// -----

func.func @region_yield(%x: !irfuse.tensor<[s0, 64], f32>) {
  %y = norm.rms_norm %x {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], f32>):
    %m = aten.call "aten::mean.dim"(%a, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
    irfuse.yield %m : !irfuse.tensor<[s0, 1], f32>
  }
  func.return
}
// CHECK: decomposition yields (!irfuse.tensor<[s0, 1], f32>) but the op returns (!irfuse.tensor<[s0, 64], f32>)

// -----

func.func @region_terminator(%x: !irfuse.tensor<[s0, 64], f32>) {
  %y = norm.rms_norm %x {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], f32>):
    %m = aten.call "aten::neg.default"(%a) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  }
  func.return
}
// CHECK: Operation aten.call terminates block in single-block region but is not a terminator
