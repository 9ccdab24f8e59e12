// RUN: irfuse-opt %s -p fuse-allreduce-rms | filecheck %s
// RUN: irfuse-opt %s -p fuse-allreduce-rms,select-kernels | filecheck %s --check-prefix=KERNEL

// All-reduce -> residual add + RMSNorm: one op naming the collective's group and world size.
// CHECK-LABEL: func.func @add_norm
// CHECK-SAME:  (%[[X:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[RES:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[W:.+]]: !irfuse.tensor<[64], bf16>)
// CHECK-NEXT:  %[[Y:.+]], %[[R:.+]] = fused.all_reduce_rms_norm %[[X]], residual %[[RES]], %[[W]] {group = "tp:0", world_size = 4 : i64, eps = 1.000000e-05 : f64} :
// CHECK-NOT:   coll.all_reduce
// CHECK-NOT:   norm.add_rms_norm
// CHECK:       func.return %[[Y]], %[[R]]
// KERNEL-LABEL: func.func @add_norm
// KERNEL:      kernel.call impl "reference" tuple "irfuse::all_reduce_rms_norm.default"(%{{.*}}, %{{.*}}, %{{.*}}, "tp:0", 1.0e-05, 0.0)
func.func @add_norm(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "tp:0", world_size = 4 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y, %r = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  func.return %y, %r : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// The all-reduced value as the residual addend (Hugging Face's `residual + hidden`), summed in
// the model dtype (round_sum), the weight product in float32 (F.rms_norm): the readings carry.
// CHECK-LABEL: func.func @addend_readings
// CHECK:       fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{[^ ]+}} {group = "0", world_size = 2 : i64, eps = 1.000000e-06 : f64, round_sum, weight_f32}
// KERNEL-LABEL: func.func @addend_readings
// KERNEL:      "irfuse::all_reduce_rms_norm.default"(%{{.*}}, %{{.*}}, %{{.*}}, "0", 1.0e-06, 0.0, round_sum = true, weight_f32 = true)
func.func @addend_readings(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y, %r = norm.add_rms_norm %res, %a, weight %w {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) decomposition {
  ^bb0(%dx: !irfuse.tensor<[s0, 64], bf16>, %dr: !irfuse.tensor<[s0, 64], bf16>, %dw: !irfuse.tensor<[64], bf16>):
    %s = aten.call "aten::add.Tensor"(%dx, %dr) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %n = aten.call "aten::rms_norm.default"(%s, [64], %dw, 1.0e-06) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %n, %s : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
  }
  func.return %y, %r : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// No residual (the first layer): the all-reduced value's other readers take residual_out.
// CHECK-LABEL: func.func @no_residual
// CHECK:       %[[Y:.+]], %[[R:.+]] = fused.all_reduce_rms_norm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-06 : f64}
// CHECK:       %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[R]], 2)
// CHECK:       func.return %[[Y]], %[[M]]
func.func @no_residual(%x: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y = norm.rms_norm %a, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %m = aten.call "aten::mul.Tensor"(%a, 2) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y, %m : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// The first layer after vLLM's vocab-parallel embedding: the all-reduced embedding is the input
// norm's x and the next norm's residual (two norms read it). The plain norm fuses; the fused op
// returns the norm output and the all-reduced value, which the next norm adds as its residual;
// that norm fuses with its own all-reduce.
// CHECK-LABEL: func.func @norm_and_residual
// CHECK:       %[[Y1:.+]], %[[E:.+]] = fused.all_reduce_rms_norm %emb, %w1 {group = "tp:0", world_size = 2 : i64, eps = 1.000000e-06 : f64}
// CHECK:       %[[H:.+]] = aten.call "aten::mul.Tensor"(%[[Y1]], 2)
// CHECK:       %[[Y2:.+]], %[[R2:.+]] = fused.all_reduce_rms_norm %[[H]], residual %[[E]], %w2 {group = "tp:0", world_size = 2 : i64, eps = 1.000000e-06 : f64}
// CHECK-NOT:   coll.all_reduce
// CHECK:       func.return %[[Y2]], %[[R2]]
// KERNEL-LABEL: func.func @norm_and_residual
// KERNEL:      "irfuse::all_reduce_rms_norm.default"(%emb, none, %w1, "tp:0", 1.0e-06, 0.0)
// KERNEL:      "irfuse::all_reduce_rms_norm.default"(%{{.+}}, %{{.+}}, %w2, "tp:0", 1.0e-06, 0.0)
func.func @norm_and_residual(%emb: !irfuse.tensor<[s0, 64], bf16>, %w1: !irfuse.tensor<[64], bf16>, %w2: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %e = coll.all_reduce %emb {group = "tp:0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y1 = norm.rms_norm %e, weight %w1 {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %h = aten.call "aten::mul.Tensor"(%y1, 2) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = coll.all_reduce %h {group = "tp:0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y2, %r2 = norm.add_rms_norm %a, %e, weight %w2 {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  func.return %y2, %r2 : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// + static FP8 spelled `y / s`: the quant folds in where it was, with its scale and `divide`.
// CHECK-LABEL: func.func @add_static
// CHECK:       %[[Q:.+]], %[[R:.+]] = fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{.*}}, scale %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<static_tensor>, divide}
// CHECK-SAME:  -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>)
// CHECK-NOT:   quant.fp8
// CHECK:       func.return %[[Q]], %[[R]]
// KERNEL-LABEL: func.func @add_static
// KERNEL:      "irfuse::all_reduce_rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, "tp", 1.0e-05, 0.0, f8E4M3FN, divide = true)
func.func @add_static(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y, %r = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>, divide} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %r : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// + per-token FP8 through a linear's view(-1, H) of a 3-D input: the fused op runs on the
// flattened input and residual; the new residual is reshaped back.
// CHECK-LABEL: func.func @per_token_view
// CHECK:       %[[FX:.+]] = aten.call "aten::flatten.using_ints"(%{{.*}}, 0, 1)
// CHECK:       %[[FR:.+]] = aten.call "aten::flatten.using_ints"(%{{.*}}, 0, 1)
// CHECK:       %[[Q:.+]], %[[SC:.+]], %[[R:.+]] = fused.all_reduce_rms_norm %[[FX]], residual %[[FR]], %{{.*}}, scale_ub %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<dynamic_token>}
// CHECK:       %[[BACK:.+]] = aten.call "aten::reshape_as.default"(%[[R]], %{{.*}})
// CHECK:       func.return %[[Q]], %[[SC]], %[[BACK]]
// KERNEL-LABEL: func.func @per_token_view
// KERNEL:      "irfuse::all_reduce_rms_norm_quant_fp8_per_token.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, "tp", 1.0e-05, 0.0, f8E4M3FN)
func.func @per_token_view(%x: !irfuse.tensor<[2, s0, 64], bf16>, %res: !irfuse.tensor<[2, s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %ub: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<["2*s0", 64], f8E4M3FN>, !irfuse.tensor<["2*s0", 1], f32>, !irfuse.tensor<[2, s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<[2, s0, 64], bf16>
  %y, %r = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[2, s0, 64], bf16>)
  %v = aten.call "aten::view.default"(%y, [-1, 64]) : (!irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<["2*s0", 64], bf16>
  %q, %sc = quant.fp8 %v, scale_ub %ub {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<["2*s0", 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<["2*s0", 64], f8E4M3FN>, scale_out !irfuse.tensor<["2*s0", 1], f32>)
  func.return %q, %sc, %r : !irfuse.tensor<["2*s0", 64], f8E4M3FN>, !irfuse.tensor<["2*s0", 1], f32>, !irfuse.tensor<[2, s0, 64], bf16>
}

// + per-group FP8 (group 64), Gemma's (1 + w), no residual.
// CHECK-LABEL: func.func @group
// CHECK:       fused.all_reduce_rms_norm %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 8 : i64, eps = 1.000000e-06 : f64, weight_offset = 1.000000e+00 : f64, scheme = #quant.scheme<group 64>}
// KERNEL-LABEL: func.func @group
// KERNEL:      "irfuse::all_reduce_rms_norm_quant_fp8_group.default"(%{{.*}}, none, %{{.*}}, "tp", 1.0e-06, 1.0, 64, false, false, f8E4M3FN)
func.func @group(%x: !irfuse.tensor<[s0, 128], bf16>, %w: !irfuse.tensor<[128], bf16>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 2], f32>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 8 : i64} : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %y = norm.rms_norm %a, weight %w {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q, %sc = quant.fp8 %y {scheme = #quant.scheme<group 64>} : (!irfuse.tensor<[s0, 128], bf16>) -> (!irfuse.tensor<[s0, 128], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 2], f32>)
  func.return %q, %sc : !irfuse.tensor<[s0, 128], f8E4M3FN>, !irfuse.tensor<[s0, 2], f32>
}

// + NVFP4 with its global scale.
// CHECK-LABEL: func.func @nvfp4
// CHECK:       %[[Q:.+]], %[[B:.+]], %{{.+}} = fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{.*}}, scale %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64, scheme = #quant.scheme<nvfp4>}
// CHECK:       func.return %[[Q]], %[[B]]
// KERNEL-LABEL: func.func @nvfp4
// KERNEL:      "irfuse::all_reduce_rms_norm_quant_nvfp4.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, "tp", 1.0e-05, 0.0)
func.func @nvfp4(%x: !irfuse.tensor<[256, 64], bf16>, %res: !irfuse.tensor<[256, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %gs: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[256, 64], bf16>) -> !irfuse.tensor<[256, 64], bf16>
  %y, %r = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[256, 64], bf16>)
  %q, %b = quant.nvfp4 %y, %gs : (!irfuse.tensor<[256, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>)
  func.return %q, %b : !irfuse.tensor<[256, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>
}

// The norm output is also used unquantized: all-reduce + norm fuse, the quant stays (remark:
// "quant not folded into the all-reduce + norm: its output is also used unquantized ...").
// CHECK-LABEL: func.func @quant_left_out
// CHECK:       %[[Y:.+]], %{{.+}} = fused.all_reduce_rms_norm %{{.*}}, residual %{{.*}}, %{{[^ ]+}} {group = "tp", world_size = 2 : i64, eps = 1.000000e-05 : f64} :
// CHECK:       quant.fp8 %[[Y]], scale
func.func @quant_left_out(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y, %r = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
  func.return %q, %y : !irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[s0, 64], bf16>
}

// Near misses (each a remark, see tests/fusions/test_fuse_allreduce_rms.py): a max all-reduce; the
// all-reduced value read besides the residual add; a norm without a weight; an all-reduce that
// feeds no norm (no candidate); an all-reduced value normalized by two norms.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.
// CHECK:       func.return
func.func @negatives(%x: !irfuse.tensor<[s0, 64], bf16>, %res: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %m = coll.all_reduce %x {group = "tp", world_size = 2 : i64, reduce_op = "max"} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y1 = norm.rms_norm %m, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %a = coll.all_reduce %y1 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y2, %r2 = norm.add_rms_norm %a, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  %k = aten.call "aten::mul.Tensor"(%a, 2) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %b = coll.all_reduce %k {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %y3 = norm.rms_norm %b {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %c = coll.all_reduce %y3 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %d = coll.all_reduce %c {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %n1 = norm.rms_norm %d, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %n2 = norm.rms_norm %d, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %y2, %r2, %k, %y3, %n1, %n2 : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>
}
