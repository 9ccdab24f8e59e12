// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// CHECK-LABEL: func.func @silu_mul
func.func @silu_mul(%x: !irfuse.tensor<[s0, 28672], bf16>, %g: !irfuse.tensor<[2, s0, 64], f32>, %u: !irfuse.tensor<[2, s0, 64], f32>) {
  // vLLM's form: x = [gate | up].
  // CHECK: %{{.*}} = act.silu_mul %{{[^ ]+}} : (!irfuse.tensor<[s0, 28672], bf16>) -> !irfuse.tensor<[s0, 14336], bf16>
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 28672], bf16>) -> !irfuse.tensor<[s0, 14336], bf16>
  // Hugging Face's form: gate and up apart.
  // CHECK-NEXT: act.silu_mul %{{.*}}, up %{{[^ ]+}} : (!irfuse.tensor<[2, s0, 64], f32>, !irfuse.tensor<[2, s0, 64], f32>) -> !irfuse.tensor<[2, s0, 64], f32>
  %y2 = act.silu_mul %g, up %u : (!irfuse.tensor<[2, s0, 64], f32>, !irfuse.tensor<[2, s0, 64], f32>) -> !irfuse.tensor<[2, s0, 64], f32>
  // GeGLU (Gemma): the gate's activation is GELU's tanh form.
  // CHECK-NEXT: act.silu_mul %{{[^ ]+}} {activation = "gelu_tanh"} : (!irfuse.tensor<[s0, 28672], bf16>) -> !irfuse.tensor<[s0, 14336], bf16>
  %y3 = act.silu_mul %x {activation = "gelu_tanh"} : (!irfuse.tensor<[s0, 28672], bf16>) -> !irfuse.tensor<[s0, 14336], bf16>
  func.return
}

// CHECK-LABEL: func.func @pad
func.func @pad(%x: !irfuse.tensor<[s0, 2880], bf16>) {
  // The default pad value 0.0 is not printed.
  // CHECK: act.pad %{{[^ ]+}} {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
  %p = act.pad %x {low = 0 : i64, high = 192 : i64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 3072], bf16>
  // CHECK-NEXT: act.pad %{{[^ ]+}} {low = 2 : i64, high = 3 : i64, value = -1.000000e+00 : f64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2885], bf16>
  %p2 = act.pad %x {low = 2 : i64, high = 3 : i64, value = -1.0 : f64} : (!irfuse.tensor<[s0, 2880], bf16>) -> !irfuse.tensor<[s0, 2885], bf16>
  func.return
}

// vLLM's native SiLU·Mul spelling, kept in the region: slices, silu, mul.
// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%x: !irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], bf16> {
  // CHECK: %[[Y:.+]] = act.silu_mul %{{[^ ]+}} : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 128], bf16>):
  // CHECK-NEXT: %[[G:.+]] = aten.call "aten::slice.Tensor"(%[[A]], -1, 0, 64)
  // CHECK-NEXT: %[[U:.+]] = aten.call "aten::slice.Tensor"(%[[A]], -1, 64, 9223372036854775807)
  // CHECK-NEXT: %[[S:.+]] = aten.call "aten::silu.default"(%[[G]])
  // CHECK-NEXT: %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[S]], %[[U]])
  // CHECK-NEXT: irfuse.yield %[[M]] : !irfuse.tensor<[s0, 64], bf16>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %[[Y]]
  %y = act.silu_mul %x : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 128], bf16>):
    %g = aten.call "aten::slice.Tensor"(%a, -1, 0, 64) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %u = aten.call "aten::slice.Tensor"(%a, -1, 64, 9223372036854775807) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %s = aten.call "aten::silu.default"(%g) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %m = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %m : !irfuse.tensor<[s0, 64], bf16>
  }
  func.return %y : !irfuse.tensor<[s0, 64], bf16>
}
