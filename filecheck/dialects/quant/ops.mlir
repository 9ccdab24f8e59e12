// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// Every quant op and every scheme survives print -> parse -> print (custom and generic forms).

// CHECK-LABEL: func.func @fp8
func.func @fp8(%x: !irfuse.tensor<[s0, 4096], bf16>, %s: !irfuse.tensor<[1], f32>, %ub: !irfuse.tensor<[], f32>) {
  // CHECK: %{{.*}} = quant.fp8 %[[X:[^,]+]], scale %{{[^ ]+}} {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FN>
  // ROCm's fnuz fp8.
  // CHECK-NEXT: quant.fp8 %[[X]], scale %{{[^ ]+}} {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FNUZ>
  %qz = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<[s0, 4096], f8E4M3FNUZ>
  // CHECK-NEXT: %{{.*}}, %{{.*}} = quant.fp8 %[[X]] {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  %q1, %s1 = quant.fp8 %x {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  // CHECK-NEXT: quant.fp8 %[[X]], scale_ub %{{[^ ]+}} {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  %q2, %s2 = quant.fp8 %x, scale_ub %ub {scheme = #quant.scheme<dynamic_token>} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 1], f32>)
  // CHECK-NEXT: quant.fp8 %[[X]] {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[1], f32>)
  %q3, %s3 = quant.fp8 %x {scheme = #quant.scheme<dynamic_tensor>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[1], f32>)
  func.return
}

// Group sizes 128 and 64, each flag alone and all together.
// CHECK-LABEL: func.func @group
func.func @group(%x: !irfuse.tensor<[s0, 4096], bf16>, %x3: !irfuse.tensor<[2, s0, 256], f16>) {
  // CHECK: {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  %q1, %s1 = quant.fp8 %x {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  // CHECK-NEXT: {scheme = #quant.scheme<group 64>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 64], f32>)
  %q2, %s2 = quant.fp8 %x {scheme = #quant.scheme<group 64>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 64], f32>)
  // CHECK-NEXT: {scheme = #quant.scheme<group 128, col_major>}
  %q3, %s3 = quant.fp8 %x {scheme = #quant.scheme<group 128, col_major>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  // CHECK-NEXT: {scheme = #quant.scheme<group 128, ue8m0>}
  %q4, %s4 = quant.fp8 %x {scheme = #quant.scheme<group 128, ue8m0>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 32], f32>)
  // Flags print in a fixed order whatever order they were written in.
  // CHECK-NEXT: {scheme = #quant.scheme<group 64, col_major, ue8m0, tma_aligned>}
  %q5, %s5 = quant.fp8 %x {scheme = #quant.scheme<group 64, tma_aligned, ue8m0, col_major>} : (!irfuse.tensor<[s0, 4096], bf16>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, scale_out !irfuse.tensor<[s0, 64], f32>)
  // A rank-3 input: scales per token and group over the last dim.
  // CHECK-NEXT: {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[2, s0, 256], f16>) -> (!irfuse.tensor<[2, s0, 256], f8E4M3FN>, scale_out !irfuse.tensor<[2, s0, 2], f32>)
  %q6, %s6 = quant.fp8 %x3 {scheme = #quant.scheme<group 128>} : (!irfuse.tensor<[2, s0, 256], f16>) -> (!irfuse.tensor<[2, s0, 256], f8E4M3FN>, scale_out !irfuse.tensor<[2, s0, 2], f32>)
  func.return
}

// CHECK-LABEL: func.func @nvfp4
func.func @nvfp4(%x: !irfuse.tensor<[s0, 4096], bf16>, %y: !irfuse.tensor<[200, 64], bf16>, %gs: !irfuse.tensor<[], f32>) {
  // A symbolic M: the swizzled scale rows are a symbolic expression.
  // CHECK: %{{.*}}, %{{.*}} = quant.nvfp4 %{{.*}}, %{{.*}} : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  %q, %bs = quant.nvfp4 %x, %gs : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 2048], ui8>, !irfuse.tensor<["128*ceiling(s0/128)", 256], f8E4M3FN>)
  // A static M = 200 pads to 256 rows; N/16 = 4 scale columns is already a multiple of 4.
  // CHECK-NEXT: quant.nvfp4 %{{.*}}, %{{.*}} : (!irfuse.tensor<[200, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[200, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>)
  %q2, %bs2 = quant.nvfp4 %y, %gs : (!irfuse.tensor<[200, 64], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[200, 32], ui8>, !irfuse.tensor<[256, 4], f8E4M3FN>)
  func.return
}

// The raised form of a static quant, with its ATen chain.
// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%x: !irfuse.tensor<[s0, 64], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> {
  // CHECK: %[[Q:.+]] = quant.fp8 %{{.*}}, scale %{{.*}} {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 64], bf16>, %[[S:.+]]: !irfuse.tensor<[], f32>):
  // CHECK-NEXT: %[[R:.+]] = aten.call "aten::reciprocal.default"(%[[S]])
  // CHECK-NEXT: %[[M:.+]] = aten.call "aten::mul.Tensor"(%[[A]], %[[R]])
  // CHECK-NEXT: %[[C:.+]] = aten.call "aten::clamp.default"(%[[M]], -448, 448)
  // CHECK-NEXT: %[[F:.+]] = aten.call "aten::_to_copy.default"(%[[C]], dtype = f8E4M3FN)
  // CHECK-NEXT: irfuse.yield %[[F]] : !irfuse.tensor<[s0, 64], f8E4M3FN>
  %q = quant.fp8 %x, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], bf16>, %sc: !irfuse.tensor<[], f32>):
    %r = aten.call "aten::reciprocal.default"(%sc) : (!irfuse.tensor<[], f32>) -> !irfuse.tensor<[], f32>
    %m = aten.call "aten::mul.Tensor"(%a, %r) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %c = aten.call "aten::clamp.default"(%m, -448, 448) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %f = aten.call "aten::_to_copy.default"(%c, dtype = f8E4M3FN) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f8E4M3FN>
    irfuse.yield %f : !irfuse.tensor<[s0, 64], f8E4M3FN>
  }
  func.return %q : !irfuse.tensor<[s0, 64], f8E4M3FN>
}
