// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: !irfuse.tensor<[s0, 4096], bf16>, %b: !irfuse.tensor<[4096, 1024], bf16>, %bias: !irfuse.tensor<[1024], bf16>) {
  // CHECK: %{{.*}} = gemm.matmul %[[A:[^,]+]], %[[B:[^ ]+]] : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>) -> !irfuse.tensor<[s0, 1024], bf16>
  %c = gemm.matmul %a, %b : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>) -> !irfuse.tensor<[s0, 1024], bf16>
  // CHECK-NEXT: gemm.matmul %[[A]], %[[B]], bias %{{[^ ]+}} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>, !irfuse.tensor<[1024], bf16>) -> !irfuse.tensor<[s0, 1024], bf16>
  %cb = gemm.matmul %a, %b, bias %bias : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096, 1024], bf16>, !irfuse.tensor<[1024], bf16>) -> !irfuse.tensor<[s0, 1024], bf16>
  func.return
}

// CHECK-LABEL: func.func @scaled
func.func @scaled(%bias32: !irfuse.tensor<[1024], f32>, %a: !irfuse.tensor<[s0, 4096], f8E4M3FN>, %b: !irfuse.tensor<[4096, 1024], f8E4M3FN>, %sa: !irfuse.tensor<[], f32>, %sb: !irfuse.tensor<[1], f32>, %sat: !irfuse.tensor<[s0, 1], f32>, %sbc: !irfuse.tensor<[1, 1024], f32>, %bias: !irfuse.tensor<[1024], bf16>) {
  // Per-tensor scales.
  // CHECK: gemm.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {out_dtype = bf16} : (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 1024], bf16>
  %c = gemm.scaled_matmul %a, %b, %sa, %sb {out_dtype = bf16} : (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[], f32>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 1024], bf16>
  // Per-token a scales, per-channel b scales, a bias, an f32 result.
  // CHECK-NEXT: gemm.scaled_matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, bias %{{[^ ]+}} {out_dtype = f32} : (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[1, 1024], f32>, !irfuse.tensor<[1024], f32>) -> !irfuse.tensor<[s0, 1024], f32>
  %c2 = gemm.scaled_matmul %a, %b, %sat, %sbc, bias %bias32 {out_dtype = f32} : (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[4096, 1024], f8E4M3FN>, !irfuse.tensor<[s0, 1], f32>, !irfuse.tensor<[1, 1024], f32>, !irfuse.tensor<[1024], f32>) -> !irfuse.tensor<[s0, 1024], f32>
  func.return
}

// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%a: !irfuse.tensor<[s0, 64], bf16>, %w: !irfuse.tensor<[32, 64], bf16>, %wt: !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16> {
  // The transposed weight view is outside the op (its operand); the mm is inside.
  // CHECK: %[[C:.+]] = gemm.matmul %{{.*}}, %{{[^ ]+}} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16> decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[X:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[Y:.+]]: !irfuse.tensor<[64, 32], bf16>):
  // CHECK-NEXT: %[[M:.+]] = aten.call "aten::mm.default"(%[[X]], %[[Y]])
  // CHECK-NEXT: irfuse.yield %[[M]]
  %c = gemm.matmul %a, %wt : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16> decomposition {
  ^bb0(%x: !irfuse.tensor<[s0, 64], bf16>, %y: !irfuse.tensor<[64, 32], bf16>):
    %m = aten.call "aten::mm.default"(%x, %y) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64, 32], bf16>) -> !irfuse.tensor<[s0, 32], bf16>
    irfuse.yield %m : !irfuse.tensor<[s0, 32], bf16>
  }
  func.return %c : !irfuse.tensor<[s0, 32], bf16>
}
