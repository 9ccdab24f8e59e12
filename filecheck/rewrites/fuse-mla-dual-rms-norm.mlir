// RUN: irfuse-opt %s -p fuse-mla-dual-rms-norm | filecheck %s
// RUN: irfuse-opt %s -p fuse-mla-dual-rms-norm,select-kernels | filecheck %s --check-prefix=KERNEL

// DeepSeek-V3's MLA: the fused q_a / kv_a projection split into q_c and kv_lora, kv_lora into
// kv_c and k_pe; q_c's norm is read (q_b_proj) before kv_c is even split off. The fused op takes
// the first norm's place, the kv split moves up with it, and each user reads its own result.
// CHECK-LABEL: func.func @deepseek_v3
// CHECK:       %[[QC:[^ ,]+]], %[[KVL:[^ ]+]] = aten.call tuple "aten::split_with_sizes.default"(%{{.*}}, [128, 144], -1)
// CHECK-NEXT:  %[[KVC:[^ ,]+]], %[[KPE:[^ ]+]] = aten.call tuple "aten::split_with_sizes.default"(%[[KVL]], [128, 16], -1)
// CHECK-NEXT:  %[[QN:.+]], %[[KVN:.+]] = fused.mla_dual_rms_norm %[[QC]], %{{[^ ,]+}}, %[[KVC]], %{{[^ ]+}} {q_eps = 1.000000e-06 : f64, kv_eps = 1.000000e-05 : f64}
// CHECK-NEXT:  gemm.matmul %[[QN]]
// CHECK-NOT:   norm.rms_norm
// CHECK:       func.return %{{.*}}, %[[KVN]], %[[KPE]]
// KERNEL-LABEL: func.func @deepseek_v3
// KERNEL:      kernel.call impl "reference" tuple "irfuse::mla_dual_rms_norm.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, 1.0e-06, 1.0e-05)
func.func @deepseek_v3(%proj: !irfuse.tensor<[s0, 272], bf16>, %qw: !irfuse.tensor<[128], bf16>, %kvw: !irfuse.tensor<[128], bf16>, %wb: !irfuse.tensor<[128, 192], bf16>) -> (!irfuse.tensor<[s0, 192], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 16], bf16>) {
  %qc, %kvl = aten.call tuple "aten::split_with_sizes.default"(%proj, [128, 144], -1) : (!irfuse.tensor<[s0, 272], bf16>) -> (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 144], bf16>)
  %qn = norm.rms_norm %qc, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %q = gemm.matmul %qn, %wb : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128, 192], bf16>) -> !irfuse.tensor<[s0, 192], bf16>
  %kvc, %kpe = aten.call tuple "aten::split_with_sizes.default"(%kvl, [128, 16], -1) : (!irfuse.tensor<[s0, 144], bf16>) -> (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 16], bf16>)
  %kvn = norm.rms_norm %kvc, weight %kvw {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return %q, %kvn, %kpe : !irfuse.tensor<[s0, 192], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 16], bf16>
}

// Slices spelled slice.Tensor (start/end on the last dim) pair the same way.
// CHECK-LABEL: func.func @slices
// CHECK:       fused.mla_dual_rms_norm
// CHECK-NOT:   norm.rms_norm
func.func @slices(%proj: !irfuse.tensor<[s0, 96], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kvw: !irfuse.tensor<[16], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 16], bf16>) {
  %qc = aten.call "aten::slice.Tensor"(%proj, -1, 0, 64) : (!irfuse.tensor<[s0, 96], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %kvc = aten.call "aten::slice.Tensor"(%proj, 1, 64, 80) : (!irfuse.tensor<[s0, 96], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  %qn = norm.rms_norm %qc, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %kvn = norm.rms_norm %kvc, weight %kvw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 16], bf16>, !irfuse.tensor<[16], bf16>) -> !irfuse.tensor<[s0, 16], bf16>
  func.return %qn, %kvn : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 16], bf16>
}

// No candidate: DeepSeek-V2-Lite has no q latent, so the kv norm is alone on its projection;
// and a norm of a whole tensor is no slice.
// CHECK-LABEL: func.func @v2_lite
// CHECK:       norm.rms_norm
// CHECK:       norm.rms_norm
// CHECK-NOT:   fused.
func.func @v2_lite(%proj: !irfuse.tensor<[s0, 272], bf16>, %x: !irfuse.tensor<[s0, 64], bf16>, %kvw: !irfuse.tensor<[128], bf16>, %w: !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %q, %kvl = aten.call tuple "aten::split_with_sizes.default"(%proj, [128, 144], -1) : (!irfuse.tensor<[s0, 272], bf16>) -> (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 144], bf16>)
  %kvc, %kpe = aten.call tuple "aten::split_with_sizes.default"(%kvl, [128, 16], -1) : (!irfuse.tensor<[s0, 144], bf16>) -> (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 16], bf16>)
  %kvn = norm.rms_norm %kvc, weight %kvw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %xn = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return %kvn, %xn : !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 64], bf16>
}

// Not fused: the two norms weight differently (Gemma's 1 + w on one only).
// CHECK-LABEL: func.func @mixed_readings
// CHECK:       norm.rms_norm
// CHECK:       norm.rms_norm
// CHECK-NOT:   fused.
func.func @mixed_readings(%proj: !irfuse.tensor<[s0, 96], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kvw: !irfuse.tensor<[32], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>) {
  %qc, %kvc = aten.call tuple "aten::split_with_sizes.default"(%proj, [64, 32], -1) : (!irfuse.tensor<[s0, 96], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>)
  %qn = norm.rms_norm %qc, weight %qw {eps = 1.0e-06 : f64, weight_offset = 1.0 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %kvn = norm.rms_norm %kvc, weight %kvw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return %qn, %kvn : !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 32], bf16>
}
