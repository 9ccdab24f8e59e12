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

// Near misses: a GEMM with a bias; a GEMM also returned; a max reduction; a gather along the
// hidden dim; a gather with two GEMM users; a gathered FP8 operand with row-wise scales.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT:   fused.
// CHECK:       func.return
func.func @near_misses(%a: !irfuse.tensor<[16, 128], bf16>, %wo: !irfuse.tensor<[128, 64], bf16>, %bias: !irfuse.tensor<[64], bf16>, %x: !irfuse.tensor<[8, 64], bf16>, %wi: !irfuse.tensor<[64, 64], bf16>, %q: !irfuse.tensor<[8, 64], f8E4M3FN>, %w8: !irfuse.tensor<[64, 64], f8E4M3FN>, %rows: !irfuse.tensor<[16, 1], f32>, %sb: !irfuse.tensor<[1], f32>) -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>) {
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
  %g8 = coll.all_gather %q {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], f8E4M3FN>) -> !irfuse.tensor<[16, 64], f8E4M3FN>
  %c3 = gemm.scaled_matmul %g8, %w8, %rows, %sb {out_dtype = bf16} : (!irfuse.tensor<[16, 64], f8E4M3FN>, !irfuse.tensor<[64, 64], f8E4M3FN>, !irfuse.tensor<[16, 1], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[16, 64], bf16>
  func.return %s1, %s2, %o2, %s3, %wide, %c1, %c2, %c3 : !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 128], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>
}
