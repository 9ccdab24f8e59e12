// RUN: irfuse-opt %s -p fuse-gemm-comms | filecheck %s
// RUN: irfuse-opt %s -p fuse-gemm-comms,select-kernels | filecheck %s --check-prefix=KERNEL

// The collectives enable-sp leaves around a norm: the row-parallel GEMM's result is
// reduce-scattered, the norm's shard all-gathered into the next GEMM. Both fuse; bf16.
// CHECK-LABEL: func.func @plain
// CHECK:       %[[C:.+]] = fused.gemm_reduce_scatter %a, %wo {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[Y:.+]] = norm.rms_norm %[[C]], weight %w
// CHECK:       %[[G:.+]] = fused.all_gather_gemm %[[Y]], %wi {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16>
// CHECK-NOT:   coll.
// CHECK-NOT:   gemm.matmul
// CHECK:       func.return %[[G]]
// KERNEL-LABEL: func.func @plain
// KERNEL:      kernel.call impl "reference" "irfuse::gemm_reduce_scatter.default"(%a, %wo, none, none, none, "sum", "tp", 2)
// KERNEL:      kernel.call impl "reference" "irfuse::all_gather_gemm.default"(%{{.+}}, %wi, none, none, none, "tp", 2)
func.func @plain(%a: !irfuse.tensor<[16, 128], bf16>, %wo: !irfuse.tensor<[128, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %wi: !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16> {
  %o = gemm.matmul %a, %wo : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %s = coll.reduce_scatter %o {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %y = norm.rms_norm %s, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %g = coll.all_gather %y {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %c = gemm.matmul %g, %wi : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16>
  func.return %c : !irfuse.tensor<[16, 256], bf16>
}

// FP8-scaled, symbolic tokens: the scaled GEMM reduce-scattered, the FP8 shard gathered into
// the next scaled GEMM (per-tensor scales), out_dtype carried.
// CHECK-LABEL: func.func @scaled
// CHECK:       %[[C:.+]] = fused.gemm_reduce_scatter %a, %wo, scale_a %sa, scale_b %sb {group = "tp", world_size = 4 : i64, out_dtype = bf16} : (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[128, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<["(s0)//4", 64], bf16>
// CHECK:       %[[G:.+]] = fused.all_gather_gemm %q, %wi, scale_a %sa, scale_b %sb {group = "tp", world_size = 4 : i64, out_dtype = bf16} : (!irfuse.tensor<["(s0)//4", 64], f8E4M3FN>, !irfuse.tensor<[64, 256], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 256], bf16>
// KERNEL-LABEL: func.func @scaled
// KERNEL:      "irfuse::gemm_reduce_scatter.default"(%a, %wo, %sa, %sb, bf16, "sum", "tp", 4)
// KERNEL:      "irfuse::all_gather_gemm.default"(%q, %wi, %sa, %sb, bf16, "tp", 4)
func.func @scaled(%a: !irfuse.tensor<[s0, 128], f8E4M3FN>, %wo: !irfuse.tensor<[128, 64], f8E4M3FN>, %sa: !irfuse.tensor<[1], f32>, %sb: !irfuse.tensor<[1], f32>, %q: !irfuse.tensor<["(s0)//4", 64], f8E4M3FN>, %wi: !irfuse.tensor<[64, 256], f8E4M3FN>) -> (!irfuse.tensor<["(s0)//4", 64], bf16>, !irfuse.tensor<[s0, 256], bf16>) {
  %o = gemm.scaled_matmul %a, %wo, %sa, %sb {out_dtype = bf16} : (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[128, 64], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  %s = coll.reduce_scatter %o {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<["(s0)//4", 64], bf16>
  %g = coll.all_gather %q {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<["(s0)//4", 64], f8E4M3FN>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %c = gemm.scaled_matmul %g, %wi, %sa, %sb {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 256], f8E4M3FN>, !irfuse.tensor<[1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 256], bf16>
  func.return %s, %c : !irfuse.tensor<["(s0)//4", 64], bf16>, !irfuse.tensor<[s0, 256], bf16>
}

// A `[B, S, H]` model: the linear views its GEMM's rows as `[1, 8, 64]`, enable-sp reshapes them
// back to rows for the reduce-scatter, and reshapes the gather to `[1, 8, 64]` for the next
// linear's `view(-1, H)`. The round trips are looked through and dropped.
// CHECK-LABEL: func.func @rank3
// CHECK:       %[[C:.+]] = fused.gemm_reduce_scatter %a, %wo {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[4, 64], bf16>
// CHECK:       %[[Y:.+]] = norm.rms_norm %[[C]], weight %w
// CHECK:       %[[G:.+]] = fused.all_gather_gemm %[[Y]], %wi {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[8, 256], bf16>
// CHECK-NOT:   aten.call
// CHECK:       func.return %[[G]]
func.func @rank3(%a: !irfuse.tensor<[8, 128], bf16>, %wo: !irfuse.tensor<[128, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %wi: !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[8, 256], bf16> {
  %o = gemm.matmul %a, %wo : (!irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %o3 = aten.call "aten::view.default"(%o, [1, 8, 64]) : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
  %o2 = aten.call "aten::reshape.default"(%o3, [-1, 64]) : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %s = coll.reduce_scatter %o2 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  %y = norm.rms_norm %s, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[4, 64], bf16>
  %g = coll.all_gather %y {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[4, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %g3 = aten.call "aten::reshape.default"(%g, [1, 8, 64]) : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
  %g2 = aten.call "aten::view.default"(%g3, [-1, 64]) : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %c = gemm.matmul %g2, %wi : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[8, 256], bf16>
  func.return %c : !irfuse.tensor<[8, 256], bf16>
}

// Row-wise scales, the two forms torch's fused_all_gather_scaled_matmul takes. Replicated: a
// scale of the gathered rows `[16, 1]` (vLLM's async-TP test writes `ones(M, 1)`), passed as it
// is. Sharded: the scale is itself the gather of the shard's scales `[8, 1]`: the fused op takes
// the shard's and gathers it with a; the scale gather goes. A row-wise scale before a
// reduce-scatter is the GEMM's own.
// CHECK-LABEL: func.func @row_wise
// CHECK:       %[[R:.+]] = fused.all_gather_gemm %q, %w8, scale_a %rows, scale_b %sb {group = "tp", world_size = 2 : i64, out_dtype = bf16} : (!irfuse.tensor<[8, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[16, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[16, 64], bf16>
// CHECK:       %[[S:.+]] = fused.all_gather_gemm %q, %w8, scale_a %sq, scale_b %sb {{.*}} : (!irfuse.tensor<[8, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[8, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[16, 64], bf16>
// CHECK:       %[[RS:.+]] = fused.gemm_reduce_scatter %a8, %w8, scale_a %rows, scale_b %sb
// CHECK-NOT:   coll.
// CHECK:       func.return %[[R]], %[[S]], %[[RS]]
// KERNEL-LABEL: func.func @row_wise
// KERNEL:      "irfuse::all_gather_gemm.default"(%q, %w8, %rows, %sb, bf16, "tp", 2)
// KERNEL:      "irfuse::all_gather_gemm.default"(%q, %w8, %sq, %sb, bf16, "tp", 2)
func.func @row_wise(%q: !irfuse.tensor<[8, 64], f8E4M3FN>, %w8: !irfuse.tensor<[64, 64], f8E4M3FN>, %rows: !irfuse.tensor<[16, 1], f32>, %sb: !irfuse.tensor<[1, 64], f32>, %sq: !irfuse.tensor<[8, 1], f32>, %a8: !irfuse.tensor<[16, 64], f8E4M3FN>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>) {
  %g1 = coll.all_gather %q {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], f8E4M3FN>) -> !irfuse.tensor<[16, 64], f8E4M3FN>
  %c1 = gemm.scaled_matmul %g1, %w8, %rows, %sb {out_dtype = bf16} : (!irfuse.tensor<[16, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[16, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[16, 64], bf16>
  %g2 = coll.all_gather %q {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], f8E4M3FN>) -> !irfuse.tensor<[16, 64], f8E4M3FN>
  %gs = coll.all_gather %sq {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 1], f32>) -> !irfuse.tensor<[16, 1], f32>
  %c2 = gemm.scaled_matmul %g2, %w8, %gs, %sb {out_dtype = bf16} : (!irfuse.tensor<[16, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[16, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[16, 64], bf16>
  %o = gemm.scaled_matmul %a8, %w8, %rows, %sb {out_dtype = bf16} : (!irfuse.tensor<[16, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[16, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[16, 64], bf16>
  %s = coll.reduce_scatter %o {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  func.return %c1, %c2, %s : !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>
}

// What enable-sp leaves on a dynamic token count s0 at TP 2: the GEMM's rows padded with zeros
// by `(-s0) % 2` before the reduce-scatter, the gather sliced back to s0 rows before the next
// GEMM. The pad moves onto the GEMM's a (zero rows of a, zero rows of the product); the gathered
// GEMM multiplies the padded rows and its product is sliced back to s0 (the same count).
// CHECK-LABEL: func.func @padded
// CHECK:       %[[N:.+]] = aten.call "aten::sym_size.int"(%a, 0)
// CHECK:       %[[PA:.+]] = aten.call "aten::constant_pad_nd.default"(%a, [0, 0, 0, %{{.+}}], 0.0) : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.sym<"Mod(-(s0), 2)">) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 128], bf16>
// CHECK:       %[[C:.+]] = fused.gemm_reduce_scatter %[[PA]], %wo {{.*}} -> !irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16>
// CHECK:       %[[Y:.+]] = norm.rms_norm %[[C]], weight %w
// CHECK:       %[[G:.+]] = fused.all_gather_gemm %[[Y]], %wi {{.*}} -> !irfuse.tensor<["2*(((s0) + 1)//2)", 256], bf16>
// CHECK:       %[[B:.+]] = aten.call "aten::slice.Tensor"(%[[G]], 0, 0, %n) : (!irfuse.tensor<["2*(((s0) + 1)//2)", 256], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 256], bf16>
// CHECK-NOT:   coll.
// CHECK-NOT:   gemm.matmul
// CHECK:       func.return %[[B]]
func.func @padded(%a: !irfuse.tensor<[s0, 128], bf16>, %wo: !irfuse.tensor<[128, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %wi: !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16> {
  %o = gemm.matmul %a, %wo : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %n = aten.call "aten::sym_size.int"(%o, 0) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.sym<s0>
  %neg = aten.call "py:operator.neg"(%n) : (!irfuse.sym<s0>) -> !irfuse.sym<"-(s0)">
  %amt = aten.call "py:operator.mod"(%neg, 2) : (!irfuse.sym<"-(s0)">) -> !irfuse.sym<"Mod(-(s0), 2)">
  %p = aten.call "aten::constant_pad_nd.default"(%o, [0, 0, 0, %amt], 0.0) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<"Mod(-(s0), 2)">) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>
  %s = coll.reduce_scatter %p {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>) -> !irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16>
  %y = norm.rms_norm %s, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16>
  %g = coll.all_gather %y {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16>) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>
  %gs = aten.call "aten::slice.Tensor"(%g, 0, 0, %n) : (!irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
  %c = gemm.matmul %gs, %wi : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  func.return %c : !irfuse.tensor<[s0, 256], bf16>
}

// A replicated row-wise scale of the token rows `[s0, 1]` where the gather was sliced back to s0:
// the fused op multiplies the padded rows, so the scale is padded like them (with ones: the
// padded rows of a are zero) and its rows are the gathered count, symbolic.
// CHECK-LABEL: func.func @padded_row_wise
// CHECK:       %[[PS:.+]] = aten.call "aten::constant_pad_nd.default"(%rows, [0, 0, 0, %{{.+}}], 1.0) : (!irfuse.tensor<[s0, 1], f32>, !irfuse.sym<"Mod(-(s0), 2)">) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 1], f32>
// CHECK:       %[[G:.+]] = fused.all_gather_gemm %q, %w8, scale_a %[[PS]], scale_b %sb {{.*}} -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>
// CHECK:       %[[B:.+]] = aten.call "aten::slice.Tensor"(%[[G]], 0, 0, %n)
// CHECK-NOT:   coll.
// CHECK:       func.return %[[B]]
// KERNEL-LABEL: func.func @padded_row_wise
// KERNEL:      "irfuse::all_gather_gemm.default"(%q, %w8, %{{.+}}, %sb, bf16, "tp", 2)
func.func @padded_row_wise(%q: !irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], f8E4M3FN>, %w8: !irfuse.tensor<[64, 64], f8E4M3FN>, %rows: !irfuse.tensor<[s0, 1], f32>, %sb: !irfuse.tensor<[1, 64], f32>, %n: !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16> {
  %g = coll.all_gather %q {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], f8E4M3FN>) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], f8E4M3FN>
  %gs = aten.call "aten::slice.Tensor"(%g, 0, 0, %n) : (!irfuse.tensor<["2*(((s0) + 1)//2)", 64], f8E4M3FN>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  %c = gemm.scaled_matmul %gs, %w8, %rows, %sb {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[1, 64], f32>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %c : !irfuse.tensor<[s0, 64], bf16>
}

// Near misses: a GEMM with a bias; a GEMM also returned; a max reduction; a gather along the
// hidden dim; a gather with two GEMM users.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT:   fused.
// CHECK:       func.return
func.func @near_misses(%a: !irfuse.tensor<[16, 128], bf16>, %wo: !irfuse.tensor<[128, 64], bf16>, %bias: !irfuse.tensor<[64], bf16>, %x: !irfuse.tensor<[8, 64], bf16>, %wi: !irfuse.tensor<[64, 64], bf16>) -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>) {
  %o1 = gemm.matmul %a, %wo, bias %bias : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[128, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %s1 = coll.reduce_scatter %o1 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %o2 = gemm.matmul %a, %wo : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %s2 = coll.reduce_scatter %o2 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %o3 = gemm.matmul %a, %wo : (!irfuse.tensor<[16, 128], bf16>, !irfuse.tensor<[128, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %s3 = coll.reduce_scatter %o3 {group = "tp", world_size = 2 : i64, reduce_op = "max"} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
  %wide = coll.all_gather %x {group = "tp", world_size = 2 : i64, dim = 1 : i64} : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[8, 128], bf16>
  %g = coll.all_gather %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %c1 = gemm.matmul %g, %wi : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %c2 = gemm.matmul %g, %wi : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  func.return %s1, %s2, %o2, %s3, %wide, %c1, %c2 : !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>
}
