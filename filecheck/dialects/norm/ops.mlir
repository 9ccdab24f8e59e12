// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// Every norm op survives print -> parse -> print, with symbolic dims, optional weights, non-default
// properties and a decomposition region.

// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %w32: !irfuse.tensor<[4096], f32>, %h: !irfuse.tensor<[s0, 32, 128], bf16>, %hw: !irfuse.tensor<[128], bf16>) {
  // CHECK: %{{.*}} = norm.rms_norm %[[X:[^,]+]], weight %[[W:[^ ]+]] {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  // The default weight_offset (0.0) is not printed; no weight, no label.
  // CHECK-NEXT: %{{.*}} = norm.rms_norm %[[X]] {eps = 1.000000e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  %bare = norm.rms_norm %x {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  // Gemma: weight offset 1.0 and an f32 weight, so y is the promoted f32.
  // CHECK-NEXT: norm.rms_norm %[[X]], weight %{{.*}} {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], f32>) -> !irfuse.tensor<[s0, 4096], f32>
  %gemma = norm.rms_norm %x, weight %w32 {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], f32>) -> !irfuse.tensor<[s0, 4096], f32>
  // A per-head norm: rank-3 x, head_dim weight.
  // CHECK-NEXT: norm.rms_norm %{{.*}}, weight %{{.*}} {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %head = norm.rms_norm %h, weight %hw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}

// The raised form keeps the ATen chain it replaced; block arguments stand for the operands.
// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%x: !irfuse.tensor<[s0, 64], f32>, %w: !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32> {
  // CHECK: %[[Y:.+]] = norm.rms_norm %{{.*}}, weight %{{.*}} {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 64], f32>, %[[B:.+]]: !irfuse.tensor<[64], f32>):
  // CHECK-NEXT: %[[P:.+]] = aten.call "aten::pow.Tensor_Scalar"(%[[A]], 2)
  // CHECK-NEXT: %[[M:.+]] = aten.call "aten::mean.dim"(%[[P]], [-1], true)
  // CHECK-NEXT: %[[E:.+]] = aten.call "aten::add.Tensor"(%[[M]], 1.0e-06)
  // CHECK-NEXT: %[[R:.+]] = aten.call "aten::rsqrt.default"(%[[E]])
  // CHECK-NEXT: %[[N:.+]] = aten.call "aten::mul.Tensor"(%[[A]], %[[R]])
  // CHECK-NEXT: %[[O:.+]] = aten.call "aten::mul.Tensor"(%[[N]], %[[B]])
  // CHECK-NEXT: irfuse.yield %[[O]] : !irfuse.tensor<[s0, 64], f32>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %[[Y]]
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], f32>, %b: !irfuse.tensor<[64], f32>):
    %p = aten.call "aten::pow.Tensor_Scalar"(%a, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %m = aten.call "aten::mean.dim"(%p, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %e = aten.call "aten::add.Tensor"(%m, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %r = aten.call "aten::rsqrt.default"(%e) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %n = aten.call "aten::mul.Tensor"(%a, %r) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %o = aten.call "aten::mul.Tensor"(%n, %b) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    irfuse.yield %o : !irfuse.tensor<[s0, 64], f32>
  }
  func.return %y : !irfuse.tensor<[s0, 64], f32>
}

// CHECK-LABEL: func.func @add_rms_norm
func.func @add_rms_norm(%x: !irfuse.tensor<[s0, 4096], bf16>, %res: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) {
  // CHECK: %{{.*}}, %{{.*}} = norm.add_rms_norm %[[X:[^,]+]], %[[RES:[^,]+]], weight %{{.*}} {eps = 1.000000e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %y, %r = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  // CHECK-NEXT: norm.add_rms_norm %[[X]], %[[RES]] {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %y2, %r2 = norm.add_rms_norm %x, %res {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  // The norm reads the rounded sum (Hugging Face).
  // CHECK-NEXT: norm.add_rms_norm %[[X]], %[[RES]], weight %{{[^ ]+}} {eps = 1.000000e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  %y3, %r3 = norm.add_rms_norm %x, %res, weight %w {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}
