// RUN: irfuse-opt %s -p raise-rms-norm | filecheck %s

// Hugging Face's residual add + RMSNorm: `hidden = residual + hidden` in bf16, then the norm of
// that rounded sum in f32 (`x.to(f32)`, pow/mean/rsqrt, `weight * y.to(bf16)`). The norm reads
// the sum rounded to bf16: `round_sum`. The sum is the new residual.
// CHECK-LABEL: func.func @hf_add
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[RES:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[64], bf16>)
// CHECK: %[[Y:.+]], %[[R:.+]] = norm.add_rms_norm %[[RES]], %[[X]], weight %[[W]] {eps = 1.000000e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[B:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[V:[^:]+]]: !irfuse.tensor<[64], bf16>):
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::add.Tensor"(%[[A]], %[[B]])
// CHECK-NEXT: %[[F:.+]] = aten.call "aten::_to_copy.default"(%[[S]], dtype = f32)
// CHECK: aten.call "aten::rsqrt.default"
// CHECK: %[[P:.+]] = aten.call "aten::mul.Tensor"(%[[V]], %{{.+}})
// CHECK-NEXT: irfuse.yield %[[P]], %[[S]]
// CHECK: func.return %[[Y]], %[[R]]
func.func @hf_add(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %h = aten.call "aten::add.Tensor"(%res, %x) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %h32 = aten.call "aten::_to_copy.default"(%h, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%h32, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%h32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %nb = aten.call "aten::_to_copy.default"(%n, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %y = aten.call "aten::mul.Tensor"(%w, %nb) : (!irfuse.tensor<[64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y, %h : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// vLLM's spelling: `x.float() + residual.float()`, the new residual is that sum rounded back, the
// norm reads the f32 sum (docs/numerics.md): no `round_sum`. The casts before the add go into
// the region; the op takes the bf16 tensors.
// CHECK-LABEL: func.func @vllm_add
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[RES:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[64], bf16>)
// CHECK-NOT: round_sum
// CHECK: %[[Y:.+]], %[[R:.+]] = norm.add_rms_norm %[[X]], %[[RES]], weight %[[W]] {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) decomposition {
// CHECK: %[[S:.+]] = aten.call "aten::add.Tensor"
// CHECK-NEXT: %[[B:.+]] = aten.call "aten::_to_copy.default"(%[[S]], dtype = bf16)
// CHECK-NEXT: aten.call "aten::pow.Tensor_Scalar"(%[[S]], 2)
// CHECK: func.return %[[Y]], %[[R]]
func.func @vllm_add(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %x32 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %r32 = aten.call "aten::_to_copy.default"(%res, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %s = aten.call "aten::add.Tensor"(%x32, %r32) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %r = aten.call "aten::_to_copy.default"(%s, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%s, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%s, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %nb = aten.call "aten::_to_copy.default"(%n, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %y = aten.call "aten::mul.Tensor"(%nb, %w) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y, %r : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// A model-dtype add feeding a whole `aten.rms_norm` (fp16): the norm reads the rounded sum, so
// `round_sum` again, whatever spells the norm.
// CHECK-LABEL: func.func @whole_op_add
// CHECK: %[[Y:.+]], %[[R:.+]] = norm.add_rms_norm %{{.+}}, %{{.+}}, weight %{{.+}} {eps = 1.000000e-05 : f64, round_sum} : (!irfuse.tensor<[s0, 64], f16>
// CHECK: aten.call "aten::add.Tensor"
// CHECK-NEXT: aten.call "aten::rms_norm.default"
// CHECK: func.return %[[Y]], %[[R]]
func.func @whole_op_add(%x: !irfuse.tensor<[s0, 64], f16>, %res: !irfuse.tensor<[s0, 64], f16>, %w: !irfuse.tensor<[64], f16>) -> (!irfuse.tensor<[s0, 64], f16>, !irfuse.tensor<[s0, 64], f16>) {
  %h = aten.call "aten::add.Tensor"(%x, %res) : (!irfuse.tensor<[s0, 64], f16>, !irfuse.tensor<[s0, 64], f16>) -> !irfuse.tensor<[s0, 64], f16>
  %y = aten.call "aten::rms_norm.default"(%h, [64], %w, 1.0e-05) : (!irfuse.tensor<[s0, 64], f16>, !irfuse.tensor<[64], f16>) -> !irfuse.tensor<[s0, 64], f16>
  func.return %y, %h : !irfuse.tensor<[s0, 64], f16>, !irfuse.tensor<[s0, 64], f16>
}

// An f32 model adding in f32: the rounded and the unrounded sum are one value, no `round_sum`.
// irfuse's own `add_rms_norm` op normalizes the f32 sum (docs/numerics.md): no `round_sum`.
// CHECK-LABEL: func.func @f32_add_and_custom_op
// CHECK-NOT: round_sum
// CHECK: norm.add_rms_norm %{{.+}}, %{{.+}}, weight %{{.+}} {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>
// CHECK: norm.add_rms_norm %{{.+}}, %{{.+}}, weight %{{.+}} {eps = 1.000000e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>
// CHECK-NOT: round_sum
// CHECK: func.return
func.func @f32_add_and_custom_op(%x: !irfuse.tensor<[s0, 64], f32>, %res: !irfuse.tensor<[s0, 64], f32>, %w: !irfuse.tensor<[64], f32>, %xb: !irfuse.tensor<[s0, 64], bf16>, %rb: !irfuse.tensor<[s0, 64], bf16>, %wb: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %h = aten.call "aten::add.Tensor"(%x, %res) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%h, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%h, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %y = aten.call "aten::mul.Tensor"(%w, %n) : (!irfuse.tensor<[64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %yb, %hb = aten.call tuple "irfuse::add_rms_norm.default"(%xb, %rb, %wb, 1.0e-06) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  func.return %y, %h, %yb, %hb : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// HunYuan in Hugging Face: the per-head q norm reads the RoPE's `q * cos + rotate_half(q) * sin`
// (bf16). That sum is the rotation, not a residual add: a plain rms_norm of it, the add left
// to raise-rope. Trimmed from a real dump.
// CHECK-LABEL: func.func @qk_norm_after_rope
// CHECK: %[[ROT:[^ ]+]] = aten.call "aten::add.Tensor"(%{{[^,]+}}, %{{[^)]+}}) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 4, s27, 16], bf16>)
// CHECK-NEXT: %{{[^ ]+}} = norm.rms_norm %[[ROT]], weight %{{[^ ]+}} {eps = 1.000000e-05 : f64}
// CHECK-NOT: norm.add_rms_norm
// CHECK: func.return
func.func @qk_norm_after_rope(%q: !irfuse.tensor<[1, 4, s27, 16], bf16>, %cos: !irfuse.tensor<[1, 1, s27, 16], bf16>, %sin: !irfuse.tensor<[1, 1, s27, 16], bf16>, %w: !irfuse.tensor<[16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16> {
  %mul_5 = aten.call "aten::mul.Tensor"(%q, %cos) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %slice_5 = aten.call "aten::slice.Tensor"(%q, 3, 0, 8) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %slice_6 = aten.call "aten::slice.Tensor"(%q, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %neg = aten.call "aten::neg.default"(%slice_6) : (!irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %cat_2 = aten.call "aten::cat.default"([%neg, %slice_5], -1) : (!irfuse.tensor<[1, 4, s27, 8], bf16>, !irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %mul_6 = aten.call "aten::mul.Tensor"(%cat_2, %sin) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %add_5 = aten.call "aten::add.Tensor"(%mul_5, %mul_6) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %_to_copy_6 = aten.call "aten::_to_copy.default"(%add_5, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %pow_1 = aten.call "aten::pow.Tensor_Scalar"(%_to_copy_6, 2) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %mean_1 = aten.call "aten::mean.dim"(%pow_1, [-1], true) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 1], f32>
  %add_7 = aten.call "aten::add.Tensor"(%mean_1, 1.0e-05) : (!irfuse.tensor<[1, 4, s27, 1], f32>) -> !irfuse.tensor<[1, 4, s27, 1], f32>
  %rsqrt_1 = aten.call "aten::rsqrt.default"(%add_7) : (!irfuse.tensor<[1, 4, s27, 1], f32>) -> !irfuse.tensor<[1, 4, s27, 1], f32>
  %mul_9 = aten.call "aten::mul.Tensor"(%_to_copy_6, %rsqrt_1) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 4, s27, 1], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %_to_copy_7 = aten.call "aten::_to_copy.default"(%mul_9, dtype = bf16) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %mul_10 = aten.call "aten::mul.Tensor"(%w, %_to_copy_7) : (!irfuse.tensor<[16], bf16>, !irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  func.return %mul_10 : !irfuse.tensor<[1, 4, s27, 16], bf16>
}

// After cse-pure the first norm's `x.to(f32)` is also the next residual add's cast of the same
// tensor (vLLM's `x.float() + residual.float()`, the residual being the embeddings). The first
// norm takes its own copy of the cast (a pure op) into its region; the original stays above it
// for the add, and then moves into the second norm's region with the add. Both norms raise.
// CHECK-LABEL: func.func @cast_shared_with_the_next_add
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[H:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[64], bf16>)
// CHECK-NEXT: %[[Y1:.+]] = norm.rms_norm %[[X]], weight %[[W]] {eps = 1.000000e-06 : f64} : {{.+}} decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %{{[^:]+}}: !irfuse.tensor<[64], bf16>):
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::_to_copy.default"(%[[A]], dtype = f32)
// CHECK-NEXT: aten.call "aten::pow.Tensor_Scalar"(%[[C]], 2)
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[Y2:.+]], %[[R:.+]] = norm.add_rms_norm %[[H]], %[[X]], weight %[[W]]
// CHECK-NEXT: ^{{.*}}(%[[HA:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[XA:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %{{[^:]+}}: !irfuse.tensor<[64], bf16>):
// CHECK-NEXT: aten.call "aten::_to_copy.default"(%[[XA]], dtype = f32)
// CHECK: func.return %[[Y1]], %[[Y2]], %[[R]]
func.func @cast_shared_with_the_next_add(%x: !irfuse.tensor<[s0, 64], bf16>, %h: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %x32 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x32, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %nb = aten.call "aten::_to_copy.default"(%n, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %y1 = aten.call "aten::mul.Tensor"(%nb, %w) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %h32 = aten.call "aten::_to_copy.default"(%h, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %s = aten.call "aten::add.Tensor"(%h32, %x32) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %r = aten.call "aten::_to_copy.default"(%s, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %sq2 = aten.call "aten::pow.Tensor_Scalar"(%s, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var2 = aten.call "aten::mean.dim"(%sq2, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve2 = aten.call "aten::add.Tensor"(%var2, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd2 = aten.call "aten::rsqrt.default"(%ve2) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n2 = aten.call "aten::mul.Tensor"(%s, %rstd2) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %nb2 = aten.call "aten::_to_copy.default"(%n2, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %y2 = aten.call "aten::mul.Tensor"(%nb2, %w) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y1, %y2, %r : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// A shared pure value the rest of the graph keeps reading: the region computes its own copy of
// `x.to(f32)` (and `x32 * x32`, which the copy feeds and the outside reads too); the originals
// stay above the norm for their outside users. `1.0 / sqrt(v)` as torch 2.13 traces it:
// `reciprocal(sqrt(v)) * 1.0`.
// CHECK-LABEL: func.func @shared_pure_values_are_cloned
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>)
// CHECK-NEXT: %[[X32:.+]] = aten.call "aten::_to_copy.default"(%[[X]], dtype = f32)
// CHECK-NEXT: %[[SQ:.+]] = aten.call "aten::mul.Tensor"(%[[X32]], %[[X32]])
// CHECK-NEXT: %[[Y:.+]] = norm.rms_norm %[[X]] {eps = 1.000000e-05 : f64} : {{.+}} decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>):
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::_to_copy.default"(%[[A]], dtype = f32)
// CHECK-NEXT: %[[CSQ:.+]] = aten.call "aten::mul.Tensor"(%[[C]], %[[C]])
// CHECK-NEXT: aten.call "aten::sum.dim_IntList"(%[[CSQ]], [-1], true)
// CHECK: aten.call "aten::reciprocal.default"
// CHECK-NEXT: aten.call "aten::mul.Tensor"(%{{.+}}, 1.0)
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[M:.+]] = aten.call "aten::mean.dim"(%[[SQ]], [-1], true)
// CHECK-NEXT: func.return %[[Y]], %[[X32]], %[[M]]
func.func @shared_pure_values_are_cloned(%x: !irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) {
  %x32 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::mul.Tensor"(%x32, %x32) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %sum = aten.call "aten::sum.dim_IntList"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %var = aten.call "aten::div.Tensor"(%sum, 64) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-05) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %sqrt = aten.call "aten::sqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %inv = aten.call "aten::reciprocal.default"(%sqrt) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::mul.Tensor"(%inv, 1.0) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %m = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  func.return %n, %x32, %m : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>
}

// A shared value made by an op cse-pure does not call pure (a `prims::` cast): not cloned, the
// norm is not raised.
// CHECK-LABEL: func.func @shared_impure_value
// CHECK-NOT: norm.rms_norm
// CHECK: func.return
func.func @shared_impure_value(%x: !irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) {
  %x32 = aten.call "prims::convert_element_type.default"(%x, f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x32, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  func.return %n, %x32 : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>
}

// Cohere's LayerNorm after cse-pure: `x - mean(x)` computed once, squared, averaged and scaled by
// the rsqrt. It reads as an RMSNorm of the centered value, but it is a LayerNorm: not raised.
// CHECK-LABEL: func.func @layer_norm_centered
// CHECK-NOT: norm.rms_norm
// CHECK: func.return
func.func @layer_norm_centered(%x: !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32> {
  %mu = aten.call "aten::mean.dim"(%x, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %c = aten.call "aten::sub.Tensor"(%x, %mu) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%c, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-05) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%c, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  func.return %n : !irfuse.tensor<[s0, 64], f32>
}

// Gemma's weight `1 + w.float()`, added in f32 as the kernels add it: weight_offset 1, the add
// inside the region.
// CHECK-LABEL: func.func @offset_f32
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[64], bf16>)
// CHECK: norm.rms_norm %[[X]], weight %[[W]] {eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64}
// CHECK: aten.call "aten::add.Tensor"
// CHECK: irfuse.yield
func.func @offset_f32(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> {
  %x32 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x32, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %w32 = aten.call "aten::_to_copy.default"(%w, dtype = f32) : (!irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[64], f32>
  %w1 = aten.call "aten::add.Tensor"(%w32, 1.0) : (!irfuse.tensor<[64], f32>) -> !irfuse.tensor<[64], f32>
  %p = aten.call "aten::mul.Tensor"(%n, %w1) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %y = aten.call "aten::_to_copy.default"(%p, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y : !irfuse.tensor<[s0, 64], bf16>
}

// `w + 1` added in bf16 rounds the sum: that sum is the weight (no weight_offset), the add stays
// outside the region and computes it.
// CHECK-LABEL: func.func @offset_bf16
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[64], bf16>)
// CHECK: %[[W1:.+]] = aten.call "aten::add.Tensor"(%[[W]], 1.0)
// CHECK: norm.rms_norm %[[X]], weight %[[W1]] {eps = 1.000000e-06 : f64} :
// CHECK-NOT: weight_offset
// CHECK: func.return
func.func @offset_bf16(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> {
  %x32 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %sq = aten.call "aten::pow.Tensor_Scalar"(%x32, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %var = aten.call "aten::mean.dim"(%sq, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %ve = aten.call "aten::add.Tensor"(%var, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %rstd = aten.call "aten::rsqrt.default"(%ve) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%x32, %rstd) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %nb = aten.call "aten::_to_copy.default"(%n, dtype = bf16) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %w1 = aten.call "aten::add.Tensor"(%w, 1.0) : (!irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[64], bf16>
  %y = aten.call "aten::mul.Tensor"(%nb, %w1) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y : !irfuse.tensor<[s0, 64], bf16>
}
