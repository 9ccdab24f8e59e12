// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @odd(%x: !irfuse.tensor<[s0, 127], bf16>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 127], bf16>) -> !irfuse.tensor<[s0, 63], bf16>
  func.return
}
// CHECK: x has shape [s0, 127]: its last dim [gate | up] must be even

// -----

func.func @half(%x: !irfuse.tensor<[s0, 128], bf16>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return
}
// CHECK: y has shape [s0, 128], expected [s0, 64]

// -----

func.func @dtype(%x: !irfuse.tensor<[s0, 128], bf16>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  func.return
}
// CHECK: y has dtype f32, expected x's bf16

// -----

func.func @int(%x: !irfuse.tensor<[s0, 128], i32>) {
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 128], i32>) -> !irfuse.tensor<[s0, 64], i32>
  func.return
}
// CHECK: x must have a float dtype (f16, bf16, f32, f64), got i32

// -----

func.func @gate_up(%g: !irfuse.tensor<[s0, 64], bf16>, %u: !irfuse.tensor<[s0, 32], bf16>) {
  %y = act.silu_mul %g, up %u : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return
}
// CHECK: up has shape [s0, 32], expected [s0, 64]

// -----

func.func @pad_size(%x: !irfuse.tensor<[s0, 2880], bf16>) {
  %p = act.pad %x {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3000], bf16>
  func.return
}
// CHECK: y has shape [s0, 3000], expected [s0, 3072]

// -----

func.func @pad_negative(%x: !irfuse.tensor<[s0, 2880], bf16>) {
  %p = act.pad %x {low = 0 : i64, high = -64 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2816], bf16>
  func.return
}
// CHECK: pad amounts must be >= 0, got low 0, high -64

// -----

func.func @pad_dtype(%x: !irfuse.tensor<[s0, 2880], bf16>) {
  %p = act.pad %x {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], f16>
  func.return
}
// CHECK: y has dtype f16, expected x's bf16
