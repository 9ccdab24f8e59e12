// RUN: irfuse-opt %s -p raise-gemm | filecheck %s

// F.linear on a 2-D activation: `t(w)` stays outside (the op's b is the [K, N] view), `mm` in.
// CHECK-LABEL: func.func @linear_mm
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[32, 64], bf16>)
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::t.default"(%[[W]])
// CHECK-NEXT: %[[Y:.+]] = gemm.matmul %[[X]], %[[T]] : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[B:[^:]+]]: !irfuse.tensor<[64, 32], bf16>):
// CHECK-NEXT: %[[M:.+]] = aten.call "aten::mm.default"(%[[A]], %[[B]])
// CHECK-NEXT: irfuse.yield %[[M]]
// CHECK: func.return %[[Y]]
func.func @linear_mm(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[32, 64], bf16>) -> !irfuse.tensor<[s0, 32], bf16> {
  %t = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[32, 64], bf16>) -> !irfuse.tensor<[64, 32], bf16>
  %y = aten.call "aten::mm.default"(%x, %t) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %y : !irfuse.tensor<[s0, 32], bf16>
}

// F.linear with a bias on a 3-D activation: `view(-1, K)` before and `view(*lead, N)` after stay
// outside; `addmm` is the product with its bias.
// CHECK-LABEL: func.func @linear_3d_bias
// CHECK-SAME: (%[[T0:[^:]+]]: !irfuse.sym<s0>, %[[X:[^:]+]]: !irfuse.tensor<[2, s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[32, 64], bf16>, %[[BIAS:[^:]+]]: !irfuse.tensor<[32], bf16>)
// CHECK: %[[V:.+]] = aten.call "aten::view.default"(%[[X]], [-1, 64])
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::t.default"(%[[W]])
// CHECK-NEXT: %[[Y:.+]] = gemm.matmul %[[V]], %[[T]], bias %[[BIAS]] : (!irfuse.tensor<["2*s0", 64], bf16>, !irfuse.tensor<[64, 32], bf16>, !irfuse.tensor<[32], bf16>) -> !irfuse.tensor<["2*s0", 32], bf16>
// CHECK: aten.call "aten::addmm.default"
// CHECK: irfuse.yield
// CHECK: %[[OUT:.+]] = aten.call "aten::view.default"(%[[Y]], [2, %[[T0]], 32])
// CHECK-NEXT: func.return %[[OUT]]
func.func @linear_3d_bias(%t0: !irfuse.sym<s0>, %x: !irfuse.tensor<[2, s0, 64], bf16>, %w: !irfuse.tensor<[32, 64], bf16>, %bias: !irfuse.tensor<[32], bf16>) -> !irfuse.tensor<[2, s0, 32], bf16> {
  %v = aten.call "aten::view.default"(%x, [-1, 64]) : (!irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<["2*s0", 64], bf16>
  %t = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[32, 64], bf16>) -> !irfuse.tensor<[64, 32], bf16>
  %y = aten.call "aten::addmm.default"(%bias, %v, %t) : (!irfuse.tensor<[32], bf16>, !irfuse.tensor<["2*s0", 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<["2*s0", 32], bf16>
  %out = aten.call "aten::view.default"(%y, [2, %t0, 32]) : (!irfuse.tensor<["2*s0", 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[2, s0, 32], bf16>
  func.return %out : !irfuse.tensor<[2, s0, 32], bf16>
}

// `_scaled_mm` with per-tensor scales and out_dtype bf16.
// CHECK-LABEL: func.func @scaled_per_tensor
// CHECK-SAME: (%[[Q:[^:]+]]: !irfuse.tensor<[s0, 64], f8E4M3FN>, %[[W:[^:]+]]: !irfuse.tensor<[32, 64], f8E4M3FN>, %[[SA:[^:]+]]: !irfuse.tensor<[1], f32>, %[[SB:[^:]+]]: !irfuse.tensor<[1], f32>)
// CHECK: %[[T:.+]] = aten.call "aten::t.default"(%[[W]])
// CHECK-NEXT: %[[Y:.+]] = gemm.scaled_matmul %[[Q]], %[[T]], %[[SA]], %[[SB]] {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16> decomposition {
// CHECK: aten.call "aten::_scaled_mm.default"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, none, none, bf16)
// CHECK: func.return %[[Y]]
func.func @scaled_per_tensor(%q: !irfuse.tensor<[s0, 64], f8E4M3FN>, %w: !irfuse.tensor<[32, 64], f8E4M3FN>, %sa: !irfuse.tensor<[1], f32>, %sb: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16> {
  %t = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[32, 64], f8E4M3FN>) -> !irfuse.tensor<[64, 32], f8E4M3FN>
  %y = aten.call "aten::_scaled_mm.default"(%q, %t, %sa, %sb, none, none, bf16) : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %y : !irfuse.tensor<[s0, 32], bf16>
}

// Per-tensor scales expanded to the row-wise shapes and made contiguous: folded, the op takes the
// one-element scales and the expand / clone move into the region.
// CHECK-LABEL: func.func @scaled_expanded
// CHECK-SAME: (%[[T0:[^:]+]]: !irfuse.sym<s0>, %[[Q:[^:]+]]: !irfuse.tensor<[s0, 64], f8E4M3FN>, %[[WT:[^:]+]]: !irfuse.tensor<[64, 32], f8E4M3FN>, %[[SA:[^:]+]]: !irfuse.tensor<[1], f32>, %[[SB:[^:]+]]: !irfuse.tensor<[1], f32>)
// CHECK-NEXT: %[[Y:.+]] = gemm.scaled_matmul %[[Q]], %[[WT]], %[[SA]], %[[SB]] {out_dtype = bf16}
// CHECK: aten.call "aten::expand.default"(%{{.+}}, [%[[T0]], 1])
// CHECK: aten.call "aten::clone.default"
// CHECK: aten.call "aten::expand.default"(%{{.+}}, [1, 32])
// CHECK: aten.call "aten::clone.default"
// CHECK: aten.call "aten::_scaled_mm.default"
// CHECK: func.return %[[Y]]
func.func @scaled_expanded(%t0: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 64], f8E4M3FN>, %wt: !irfuse.tensor<[64, 32], f8E4M3FN>, %sa: !irfuse.tensor<[1], f32>, %sb: !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16> {
  %ea = aten.call "aten::expand.default"(%sa, [%t0, 1]) : (!irfuse.tensor<[1], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 1], f32>
  %ca = aten.call "aten::clone.default"(%ea, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %eb = aten.call "aten::expand.default"(%sb, [1, 32]) : (!irfuse.tensor<[1], f32>) -> !irfuse.tensor<[1, 32], f32>
  %cb = aten.call "aten::clone.default"(%eb, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 32], f32>) -> !irfuse.tensor<[1, 32], f32>
  %y = aten.call "aten::_scaled_mm.default"(%q, %wt, %ca, %cb, none, none, bf16) : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[1, 32], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %y : !irfuse.tensor<[s0, 32], bf16>
}

// Row-wise scales (per token [M, 1], per channel [1, N]), a bias, f32 output.
// CHECK-LABEL: func.func @scaled_row_wise_bias
// CHECK-SAME: (%[[Q:[^:]+]]: !irfuse.tensor<[s0, 64], f8E4M3FN>, %[[WT:[^:]+]]: !irfuse.tensor<[64, 32], f8E4M3FN>, %[[SA:[^:]+]]: !irfuse.tensor<[s0, 1], f32>, %[[SB:[^:]+]]: !irfuse.tensor<[1, 32], f32>, %[[BIAS:[^:]+]]: !irfuse.tensor<[32], f32>)
// CHECK-NEXT: gemm.scaled_matmul %[[Q]], %[[WT]], %[[SA]], %[[SB]], bias %[[BIAS]] {out_dtype = f32}
func.func @scaled_row_wise_bias(%q: !irfuse.tensor<[s0, 64], f8E4M3FN>, %wt: !irfuse.tensor<[64, 32], f8E4M3FN>, %sa: !irfuse.tensor<[s0, 1], f32>, %sb: !irfuse.tensor<[1, 32], f32>, %bias: !irfuse.tensor<[32], f32>) -> !irfuse.tensor<[s0, 32], f32> {
  %y = aten.call "aten::_scaled_mm.default"(%q, %wt, %sa, %sb, %bias, none, f32) : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[1, 32], f32>, !irfuse.tensor<[32], f32>) -> !irfuse.tensor<[s0, 32], f32>
  func.return %y : !irfuse.tensor<[s0, 32], f32>
}

// A bmm of a batch of one on reshaped 2-D operands, reshaped back: the reshapes go in.
// CHECK-LABEL: func.func @bmm_batch_of_one
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[WT:[^:]+]]: !irfuse.tensor<[64, 32], bf16>)
// CHECK-NEXT: %[[Y:.+]] = gemm.matmul %[[X]], %[[WT]] : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
// CHECK: aten.call "aten::unsqueeze.default"
// CHECK: aten.call "aten::unsqueeze.default"
// CHECK: aten.call "aten::bmm.default"
// CHECK: %[[S:.+]] = aten.call "aten::squeeze.dim"
// CHECK-NEXT: irfuse.yield %[[S]]
// CHECK: func.return %[[Y]]
func.func @bmm_batch_of_one(%x: !irfuse.tensor<[s0, 64], bf16>, %wt: !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16> {
  %a = aten.call "aten::unsqueeze.default"(%x, 0) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[1, s0, 64], bf16>
  %b = aten.call "aten::unsqueeze.default"(%wt, 0) : (!irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[1, 64, 32], bf16>
  %p = aten.call "aten::bmm.default"(%a, %b) : (!irfuse.tensor<[1, s0, 64], bf16>, !irfuse.tensor<[1, 64, 32], bf16>) -> !irfuse.tensor<[1, s0, 32], bf16>
  %y = aten.call "aten::squeeze.dim"(%p, 0) : (!irfuse.tensor<[1, s0, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %y : !irfuse.tensor<[s0, 32], bf16>
}

// Whole `linear` (a new `t` of the weight makes the [K, N] operand) and 2-D `matmul`.
// CHECK-LABEL: func.func @whole_linear_matmul
// CHECK-SAME: (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:[^:]+]]: !irfuse.tensor<[32, 64], bf16>, %[[BIAS:[^:]+]]: !irfuse.tensor<[32], bf16>, %[[WT:[^:]+]]: !irfuse.tensor<[64, 32], bf16>)
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::t.default"(%[[W]]) : (!irfuse.tensor<[32, 64], bf16>) -> !irfuse.tensor<[64, 32], bf16>
// CHECK-NEXT: gemm.matmul %[[X]], %[[T]], bias %[[BIAS]]
// CHECK: aten.call "aten::linear.default"(%{{.+}}, %[[W]], %{{.+}})
// CHECK: gemm.matmul %[[X]], %[[WT]]
// CHECK: aten.call "aten::matmul.default"
func.func @whole_linear_matmul(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[32, 64], bf16>, %bias: !irfuse.tensor<[32], bf16>, %wt: !irfuse.tensor<[64, 32], bf16>) -> (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>) {
  %y = aten.call "aten::linear.default"(%x, %w, %bias) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[32, 64], bf16>, !irfuse.tensor<[32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  %z = aten.call "aten::matmul.default"(%x, %wt) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %y, %z : !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>
}

// --- not raised ---

// addmm with beta != 1; _scaled_mm with use_fast_accum; block-wise scale_a [M, K/128].
// CHECK-LABEL: func.func @not_raised
// CHECK-NOT: gemm.
// CHECK: func.return
func.func @not_raised(%x: !irfuse.tensor<[s0, 256], bf16>, %wt: !irfuse.tensor<[256, 32], bf16>, %bias: !irfuse.tensor<[32], bf16>, %q: !irfuse.tensor<[s0, 256], f8E4M3FN>, %qw: !irfuse.tensor<[256, 32], f8E4M3FN>, %s: !irfuse.tensor<[1], f32>, %sblk: !irfuse.tensor<[s0, 2], f32>) -> (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>) {
  %a = aten.call "aten::addmm.default"(%bias, %x, %wt, beta = 0.5) : (!irfuse.tensor<[32], bf16>, !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[256, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  %f = aten.call "aten::_scaled_mm.default"(%q, %qw, %s, %s, none, none, bf16, true) : (!irfuse.tensor<[s0, 256], f8E4M3FN>, !irfuse.tensor<[256, 32], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  %b = aten.call "aten::_scaled_mm.default"(%q, %qw, %sblk, %s, none, none, bf16) : (!irfuse.tensor<[s0, 256], f8E4M3FN>, !irfuse.tensor<[256, 32], f8E4M3FN>, !irfuse.tensor<[s0, 2], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %a, %f, %b : !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[s0, 32], bf16>
}

// Attention's batched bmm (batch = heads) is not a linear layer's product.
// CHECK-LABEL: func.func @batched_bmm
// CHECK-NOT: gemm.
// CHECK: func.return
func.func @batched_bmm(%q: !irfuse.tensor<[4, s0, 64], f32>, %k: !irfuse.tensor<[4, 64, s0], f32>) -> !irfuse.tensor<[4, s0, s0], f32> {
  %s = aten.call "aten::bmm.default"(%q, %k) : (!irfuse.tensor<[4, s0, 64], f32>, !irfuse.tensor<[4, 64, s0], f32>) -> !irfuse.tensor<[4, s0, s0], f32>
  func.return %s : !irfuse.tensor<[4, s0, s0], f32>
}
