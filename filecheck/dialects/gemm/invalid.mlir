// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @k_mismatch(%a: !irfuse.tensor<[s0, 4096], bf16>, %b: !irfuse.tensor<[2048, 1024], bf16>) {
  %c = gemm.matmul %a, %b : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[2048, 1024], bf16>) -> !irfuse.tensor<[s0, 1024], bf16>
  func.return
}
// CHECK: b's dim 0 (K) is 2048, expected 4096

// -----

func.func @rank(%a: !irfuse.tensor<[2, s0, 4096], bf16>, %b: !irfuse.tensor<[4096, 1024], bf16>) {
  %c = gemm.matmul %a, %b : (!irfuse.tensor<[2, s0, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>) -> !irfuse.tensor<[2, s0, 1024], bf16>
  func.return
}
// CHECK: a must have rank 2, got [2, s0, 4096]

// -----

func.func @mixed_dtypes(%a: !irfuse.tensor<[s0, 64], bf16>, %b: !irfuse.tensor<[64, 32], f32>) {
  %c = gemm.matmul %a, %b : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: b has dtype f32, expected a's bf16

// -----

func.func @c_shape(%a: !irfuse.tensor<[s0, 64], bf16>, %b: !irfuse.tensor<[64, 32], bf16>) {
  %c = gemm.matmul %a, %b : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  func.return
}
// CHECK: c has shape [s0, 64], expected [s0, 32]

// -----

func.func @bias_shape(%a: !irfuse.tensor<[s0, 64], bf16>, %b: !irfuse.tensor<[64, 32], bf16>, %bias: !irfuse.tensor<[64], bf16>) {
  %c = gemm.matmul %a, %b, bias %bias : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: bias has shape [64], expected [32]

// -----

func.func @scaled_not_fp8(%a: !irfuse.tensor<[s0, 64], bf16>, %b: !irfuse.tensor<[64, 32], f8E4M3FN>, %s: !irfuse.tensor<[], f32>) {
  %c = gemm.scaled_matmul %a, %b, %s, %s {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: a of a scaled matmul must be fp8, got bf16

// -----

func.func @scale_a_rows(%a: !irfuse.tensor<[s0, 64], f8E4M3FN>, %b: !irfuse.tensor<[64, 32], f8E4M3FN>, %sa: !irfuse.tensor<[s1, 1], f32>, %s: !irfuse.tensor<[], f32>) {
  %c = gemm.scaled_matmul %a, %b, %sa, %s {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[s1, 1], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: scale_a (per-tensor [1] or row-wise [M, 1]) has shape [s1, 1], expected [s0, 1]

// -----

func.func @scale_b_cols(%a: !irfuse.tensor<[s0, 64], f8E4M3FN>, %b: !irfuse.tensor<[64, 32], f8E4M3FN>, %sb: !irfuse.tensor<[32, 1], f32>, %s: !irfuse.tensor<[], f32>) {
  %c = gemm.scaled_matmul %a, %b, %s, %sb {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[32, 1], f32>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: scale_b (per-tensor [1] or column-wise [1, N]) has shape [32, 1], expected [1, 32]

// -----

func.func @scale_dtype(%a: !irfuse.tensor<[s0, 64], f8E4M3FN>, %b: !irfuse.tensor<[64, 32], f8E4M3FN>, %s: !irfuse.tensor<[], f32>, %h: !irfuse.tensor<[], bf16>) {
  %c = gemm.scaled_matmul %a, %b, %s, %h {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
  func.return
}
// CHECK: scale_b must have dtype f32, got bf16

// -----

func.func @out_dtype(%a: !irfuse.tensor<[s0, 64], f8E4M3FN>, %b: !irfuse.tensor<[64, 32], f8E4M3FN>, %s: !irfuse.tensor<[], f32>) {
  %c = gemm.scaled_matmul %a, %b, %s, %s {out_dtype = bf16} : (!irfuse.tensor<[s0, 64], f8E4M3FN>, !irfuse.tensor<[64, 32], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 32], f16>
  func.return
}
// CHECK: c has dtype f16 but out_dtype is bf16
