// RUN: irfuse-opt %s -p raise-silu-mul | filecheck %s

// vLLM's spelling: silu(x[..., :d]) * x[..., d:] (slices of the last dim, the second open-ended).
// CHECK-LABEL: func.func @slices
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 1024], bf16>)
// CHECK: %[[Y:.+]] = act.silu_mul %[[X]] : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 1024], bf16>):
// CHECK-NEXT: %[[G:.+]] = aten.call "aten::slice.Tensor"(%[[A]], 1, 0, 512)
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::silu.default"(%[[G]])
// CHECK-NEXT: %[[U:.+]] = aten.call "aten::slice.Tensor"(%[[A]], 1, 512, 9223372036854775807)
// CHECK-NEXT: %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[S]], %[[U]])
// CHECK-NEXT: irfuse.yield %[[M]]
// CHECK: func.return %[[Y]]
func.func @slices(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %g = aten.call "aten::slice.Tensor"(%x, 1, 0, 512) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %s = aten.call "aten::silu.default"(%g) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %u = aten.call "aten::slice.Tensor"(%x, 1, 512, 9223372036854775807) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// x.chunk(2, -1) becomes split.Tensor; the product written up * silu(gate).
// CHECK-LABEL: func.func @chunk
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[2, s0, 256], f32>)
// CHECK: act.silu_mul %[[X]] : (!irfuse.tensor<[2, s0, 256], f32>) -> !irfuse.tensor<[2, s0, 128], f32> decomposition {
// CHECK: aten.call tuple "aten::split.Tensor"
// CHECK: irfuse.yield
func.func @chunk(%x: !irfuse.tensor<[2, s0, 256], f32>) -> !irfuse.tensor<[2, s0, 128], f32> {
  %g, %u = aten.call tuple "aten::split.Tensor"(%x, 128, -1) : (!irfuse.tensor<[2, s0, 256], f32>) -> (!irfuse.tensor<[2, s0, 128], f32>, !irfuse.tensor<[2, s0, 128], f32>)
  %s = aten.call "aten::silu.default"(%g) : (!irfuse.tensor<[2, s0, 128], f32>) -> !irfuse.tensor<[2, s0, 128], f32>
  %y = aten.call "aten::mul.Tensor"(%u, %s) : (!irfuse.tensor<[2, s0, 128], f32>, !irfuse.tensor<[2, s0, 128], f32>) -> !irfuse.tensor<[2, s0, 128], f32>
  func.return %y : !irfuse.tensor<[2, s0, 128], f32>
}

// torch.split(x, [d, d], -1) becomes split_with_sizes.
// CHECK-LABEL: func.func @split_with_sizes
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 1024], bf16>)
// CHECK: act.silu_mul %[[X]] : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
func.func @split_with_sizes(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %g, %u = aten.call tuple "aten::split_with_sizes.default"(%x, [512, 512], -1) : (!irfuse.tensor<[s0, 1024], bf16>) -> (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>)
  %s = aten.call "aten::silu.default"(%g) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// Hugging Face's MLP: act_fn(gate_proj(x)) * up_proj(x), two operands.
// CHECK-LABEL: func.func @separate
// CHECK-SAME: (%[[G:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>, %[[U:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>)
// CHECK: %[[Y:.+]] = act.silu_mul %[[G]], up %[[U]] : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>, %[[B:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>):
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::silu.default"(%[[A]])
// CHECK-NEXT: %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[S]], %[[B]])
// CHECK-NEXT: irfuse.yield %[[M]]
func.func @separate(%gate: !irfuse.tensor<[s0, 512], bf16>, %up: !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %s = aten.call "aten::silu.default"(%gate) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %up) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// The decomposed SiLU a * sigmoid(a) (written sigmoid(a) * a here), times up.
// CHECK-LABEL: func.func @sigmoid
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 1024], bf16>)
// CHECK: act.silu_mul %[[X]] : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> decomposition {
// CHECK: aten.call "aten::sigmoid.default"
// CHECK: irfuse.yield
// CHECK-NOT: aten::sigmoid
func.func @sigmoid(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %g = aten.call "aten::slice.Tensor"(%x, 1, 0, 512) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %u = aten.call "aten::slice.Tensor"(%x, 1, 512, 9223372036854775807) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %sg = aten.call "aten::sigmoid.default"(%g) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %s = aten.call "aten::mul.Tensor"(%sg, %g) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// irfuse's own op, raised whole.
// CHECK-LABEL: func.func @custom_op
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 1024], bf16>)
// CHECK: act.silu_mul %[[X]] : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 1024], bf16>):
// CHECK-NEXT: aten.call "irfuse::silu_mul.default"(%[[A]])
func.func @custom_op(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %y = aten.call "irfuse::silu_mul.default"(%x) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// silu of the second half times the first half: not [gate | up], so the two-operand form
// with the slices outside.
// CHECK-LABEL: func.func @swapped_halves
// CHECK: %[[U:.+]] = aten.call "aten::slice.Tensor"(%{{.*}}, -1, 0, 512)
// CHECK: %[[G:.+]] = aten.call "aten::slice.Tensor"(%{{.*}}, -1, 512, 1024)
// CHECK: act.silu_mul %[[G]], up %[[U]]
func.func @swapped_halves(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %u = aten.call "aten::slice.Tensor"(%x, -1, 0, 512) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %g = aten.call "aten::slice.Tensor"(%x, -1, 512, 1024) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %s = aten.call "aten::silu.default"(%g) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// Negative: silu(a) times a per-row scale (not gate and up of one shape).
// CHECK-LABEL: func.func @broadcast_scale
// CHECK-NOT: act.silu_mul
// CHECK: func.return
func.func @broadcast_scale(%a: !irfuse.tensor<[s0, 512], bf16>, %b: !irfuse.tensor<[s0, 1], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %s = aten.call "aten::silu.default"(%a) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %b) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// GeGLU: a gated GELU is the same op with its activation (approximate "tanh": gelu_tanh).
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 1024], bf16>)
// CHECK-NEXT: %[[Y:.+]] = act.silu_mul %[[X]] {activation = "gelu_tanh"} : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> decomposition
// CHECK: aten.call "aten::gelu.default"(%{{.*}}, approximate = "tanh")
// CHECK: func.return %[[Y]]
func.func @gelu(%x: !irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %g = aten.call "aten::slice.Tensor"(%x, 1, 0, 512) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %s = aten.call "aten::gelu.default"(%g, approximate = "tanh") : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %u = aten.call "aten::slice.Tensor"(%x, 1, 512, 9223372036854775807) : (!irfuse.tensor<[s0, 1024], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %u) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}

// The SiLU output is also returned: the SiLU is pure, so the region takes its own copy and the
// original stays above the op for the return.
// CHECK-LABEL: func.func @silu_escapes
// CHECK-SAME: (%[[A:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>, %[[B:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>)
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::silu.default"(%[[A]])
// CHECK-NEXT: %[[Y:.+]] = act.silu_mul %[[A]], up %[[B]]
// CHECK-NEXT: ^{{.*}}(%[[GA:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>, %[[UA:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>):
// CHECK-NEXT: %[[S2:.+]] = aten.call "aten::silu.default"(%[[GA]])
// CHECK-NEXT: aten.call "aten::mul.Tensor"(%[[S2]], %[[UA]])
// CHECK: func.return %[[Y]], %[[S]]
func.func @silu_escapes(%a: !irfuse.tensor<[s0, 512], bf16>, %b: !irfuse.tensor<[s0, 512], bf16>) -> (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) {
  %s = aten.call "aten::silu.default"(%a) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%s, %b) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y, %s : !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>
}

// GeGLU with the erf GELU (no approximate), gate and up apart: activation gelu.
// CHECK-LABEL: func.func @gelu_erf_separate
// CHECK-SAME: (%[[G:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>, %[[U:[^:]+]]: !irfuse.tensor<[s0, 512], bf16>)
// CHECK-NEXT: %[[Y:.+]] = act.silu_mul %[[G]], up %[[U]] {activation = "gelu"}
// CHECK: func.return %[[Y]]
func.func @gelu_erf_separate(%g: !irfuse.tensor<[s0, 512], bf16>, %u: !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16> {
  %s = aten.call "aten::gelu.default"(%g) : (!irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  %y = aten.call "aten::mul.Tensor"(%u, %s) : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 512], bf16>) -> !irfuse.tensor<[s0, 512], bf16>
  func.return %y : !irfuse.tensor<[s0, 512], bf16>
}
