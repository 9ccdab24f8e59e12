// RUN: irfuse-opt %s -p raise-attention | filecheck %s

// The CPU kernel with native GQA (4 q heads, 2 kv heads), causal, an explicit scale; the
// transposes into SDPA's layout stay outside; the unused logsumexp goes with the call.
// CHECK-LABEL: func.func @cpu_gqa
// CHECK-SAME: (%[[Q:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[K:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>)
// CHECK: %[[O:.+]] = attn.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[B:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>, %[[C:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>):
// CHECK-NEXT: %[[S:.+]], %{{.+}} = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%[[A]], %[[B]], %[[C]], 0.0, true, scale = 0.125)
// CHECK-NEXT: irfuse.yield %[[S]]
// CHECK: aten.call "aten::squeeze.dim"(%[[O]], 0)
func.func @cpu_gqa(%q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[4, s0, 64], bf16> {
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %k, %v, 0.0, true, scale = 0.125) : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  %s = aten.call "aten::squeeze.dim"(%o, 0) : (!irfuse.tensor<[1, 4, s0, 64], bf16>) -> !irfuse.tensor<[4, s0, 64], bf16>
  func.return %s : !irfuse.tensor<[4, s0, 64], bf16>
}

// Hugging Face's repeat_kv before SDPA (unsqueeze, no-op slice, expand, copy, view): the
// repeats join the region and k, v are the un-repeated tensors; no scale given: 1/sqrt(64).
// CHECK-LABEL: func.func @repeat_kv
// CHECK-SAME: (%[[T:.+]]: !irfuse.sym<s0>, %[[Q:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[K:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>)
// CHECK: %[[O:.+]] = attn.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16> decomposition {
// CHECK: "aten::expand.default"
// CHECK: "aten::_unsafe_view.default"
// CHECK: "aten::_scaled_dot_product_flash_attention_for_cpu.default"
// CHECK: func.return %[[O]]
func.func @repeat_kv(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16> {
  %u0 = aten.call "aten::unsqueeze.default"(%k, 2) : (!irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 1, s0, 64], bf16>
  %sl0 = aten.call "aten::slice.Tensor"(%u0, 3, 0, 9223372036854775807) : (!irfuse.tensor<[1, 2, 1, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 1, s0, 64], bf16>
  %e0 = aten.call "aten::expand.default"(%sl0, [1, 2, 2, %t, 64]) : (!irfuse.tensor<[1, 2, 1, s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 64], bf16>
  %c0 = aten.call "aten::clone.default"(%e0, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 2, s0, 64], bf16>
  %r0 = aten.call "aten::_unsafe_view.default"(%c0, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 2, 2, s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], bf16>
  %u1 = aten.call "aten::unsqueeze.default"(%v, 2) : (!irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 1, s0, 64], bf16>
  %sl1 = aten.call "aten::slice.Tensor"(%u1, 3, 0, 9223372036854775807) : (!irfuse.tensor<[1, 2, 1, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 1, s0, 64], bf16>
  %e1 = aten.call "aten::expand.default"(%sl1, [1, 2, 2, %t, 64]) : (!irfuse.tensor<[1, 2, 1, s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 64], bf16>
  %c1 = aten.call "aten::clone.default"(%e1, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, 2, s0, 64], bf16>
  %r1 = aten.call "aten::_unsafe_view.default"(%c1, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 2, 2, s0, 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %r0, %r1, 0.0, true) : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  func.return %o : !irfuse.tensor<[1, 4, s0, 64], bf16>
}

// A bool mask, which SDPA turns into where(mask, 0, -inf): the op takes the bool mask.
// CHECK-LABEL: func.func @bool_mask
// CHECK-SAME: (%[[Q:.+]]: !irfuse.tensor<[1, 4, 8, 64], bf16>, %[[K:.+]]: !irfuse.tensor<[1, 4, 8, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[1, 4, 8, 64], bf16>, %[[M:.+]]: !irfuse.tensor<[1, 1, 8, 8], i1>)
// CHECK: %[[O:.+]] = attn.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {scale = 1.250000e-01 : f64} : (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 1, 8, 8], i1>) -> !irfuse.tensor<[1, 4, 8, 64], bf16> decomposition {
// CHECK: "aten::where.self"
// CHECK: "aten::_scaled_dot_product_flash_attention_for_cpu.default"({{.+}}, attn_mask = %{{.+}})
// CHECK: func.return %[[O]]
func.func @bool_mask(%q: !irfuse.tensor<[1, 4, 8, 64], bf16>, %k: !irfuse.tensor<[1, 4, 8, 64], bf16>, %v: !irfuse.tensor<[1, 4, 8, 64], bf16>, %m: !irfuse.tensor<[1, 1, 8, 8], i1>) -> !irfuse.tensor<[1, 4, 8, 64], bf16> {
  %ninf = aten.call "aten::scalar_tensor.default"(ninf, dtype = bf16, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], bf16>
  %zero = aten.call "aten::scalar_tensor.default"(0.0, dtype = bf16, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], bf16>
  %bias = aten.call "aten::where.self"(%m, %zero, %ninf) : (!irfuse.tensor<[1, 1, 8, 8], i1>, !irfuse.tensor<[], bf16>, !irfuse.tensor<[], bf16>) -> !irfuse.tensor<[1, 1, 8, 8], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %k, %v, attn_mask = %bias) : (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 1, 8, 8], bf16>) -> (!irfuse.tensor<[1, 4, 8, 64], bf16>, !irfuse.tensor<[1, 4, 8], f32>)
  func.return %o : !irfuse.tensor<[1, 4, 8, 64], bf16>
}

// CUDA: cuDNN with an additive float mask (cuDNN's where(mask, 0, -65504) stays a float mask);
// the efficient kernel, causal with the default scale of a 128 head dim; flash on a head dim of
// 20, zero-padded to 24 around the call (the pads and the slice back join the region).
// CHECK-LABEL: func.func @cuda
// CHECK-SAME: (%[[Q:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[K:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[B:.+]]: !irfuse.tensor<[1, 1, s0, s0], bf16>, %[[Q2:.+]]: !irfuse.tensor<[1, 4, s0, 128], bf16>, %[[Q3:.+]]: !irfuse.tensor<[1, 4, s0, 20], bf16>)
// CHECK: %[[O1:.+]] = attn.attention %[[Q]], %[[K]], %[[V]], mask %[[B]] {scale = 1.000000e-01 : f64} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 1, s0, s0], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16> decomposition {
// CHECK: "aten::_scaled_dot_product_cudnn_attention.default"
// CHECK: %[[O2:.+]] = attn.attention %[[Q2]], %[[Q2]], %[[Q2]] {scale = 0.088388347648318433 : f64, causal = true}
// CHECK: "aten::_scaled_dot_product_efficient_attention.default"
// CHECK: %[[O3:.+]] = attn.attention %[[Q3]], %[[Q3]], %[[Q3]] {scale = 0.22360679774997896 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 20], bf16>, !irfuse.tensor<[1, 4, s0, 20], bf16>, !irfuse.tensor<[1, 4, s0, 20], bf16>) -> !irfuse.tensor<[1, 4, s0, 20], bf16> decomposition {
// CHECK: "aten::constant_pad_nd.default"
// CHECK: "aten::_scaled_dot_product_flash_attention.default"
// CHECK: "aten::slice.Tensor"
// CHECK: func.return %[[O1]], %[[O2]], %[[O3]]
func.func @cuda(%q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 4, s0, 64], bf16>, %v: !irfuse.tensor<[1, 4, s0, 64], bf16>, %bias: !irfuse.tensor<[1, 1, s0, s0], bf16>, %q2: !irfuse.tensor<[1, 4, s0, 128], bf16>, %q3: !irfuse.tensor<[1, 4, s0, 20], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 128], bf16>, !irfuse.tensor<[1, 4, s0, 20], bf16>) {
  %o1:9 = aten.call tuple "aten::_scaled_dot_product_cudnn_attention.default"(%q, %k, %v, %bias, false, scale = 0.1) : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 1, s0, s0], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>, !irfuse.tensor<[0], i64>, !irfuse.tensor<[0], i64>, !irfuse.sym<s0>, !irfuse.sym<s0>, !irfuse.tensor<[], i64>, !irfuse.tensor<[], i64>, !irfuse.tensor<[0], bf16>)
  %o2:4 = aten.call tuple "aten::_scaled_dot_product_efficient_attention.default"(%q2, %q2, %q2, none, false, 0.0, true) : (!irfuse.tensor<[1, 4, s0, 128], bf16>, !irfuse.tensor<[1, 4, s0, 128], bf16>, !irfuse.tensor<[1, 4, s0, 128], bf16>) -> (!irfuse.tensor<[1, 4, s0, 128], bf16>, !irfuse.tensor<[1, 4, s0], f32>, !irfuse.tensor<[], i64>, !irfuse.tensor<[], i64>)
  %p = aten.call "aten::constant_pad_nd.default"(%q3, [0, 4], 0.0) : (!irfuse.tensor<[1, 4, s0, 20], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %o3:9 = aten.call tuple "aten::_scaled_dot_product_flash_attention.default"(%p, %p, %p, 0.0, true, scale = 0.22360679774997896) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>) -> (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0], f32>, !irfuse.tensor<[0], i64>, !irfuse.tensor<[0], i64>, !irfuse.sym<s0>, !irfuse.sym<s0>, !irfuse.tensor<[], i64>, !irfuse.tensor<[], i64>, !irfuse.tensor<[0], bf16>)
  %s3 = aten.call "aten::slice.Tensor"(%o3#0, -1, 0, 20) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 20], bf16>
  func.return %o1#0, %o2#0, %s3 : !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 128], bf16>, !irfuse.tensor<[1, 4, s0, 20], bf16>
}
// The math fallback, decomposed (the CPU's path when v's head dim differs): casts to f32, q and
// k each scaled by sqrt(scale), GQA by repeat after the cast, the causal where(tril(ones)), the
// two batched matmuls around _safe_softmax, the cast back. The op takes the bf16 q, k, v.
// CHECK-LABEL: func.func @math
// CHECK-SAME: (%{{.+}}: !irfuse.sym<s0>, %[[Q:.+]]: !irfuse.tensor<[1, 4, s0, 64], bf16>, %[[K:.+]]: !irfuse.tensor<[1, 2, s0, 64], bf16>, %[[V:.+]]: !irfuse.tensor<[1, 2, s0, 32], bf16>)
// CHECK: %[[O:.+]] = attn.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 32], bf16>) -> !irfuse.tensor<[1, 4, s0, 32], bf16> decomposition {
// CHECK: "aten::tril.default"
// CHECK: "aten::_safe_softmax.default"
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[O]]
func.func @math(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 32], bf16>) -> !irfuse.tensor<[1, 4, s0, 32], bf16> {
  %qf = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 4, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %kf = aten.call "aten::_to_copy.default"(%k, dtype = f32) : (!irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, s0, 64], f32>
  %vf = aten.call "aten::_to_copy.default"(%v, dtype = f32) : (!irfuse.tensor<[1, 2, s0, 32], bf16>) -> !irfuse.tensor<[1, 2, s0, 32], f32>
  %qs = aten.call "aten::mul.Scalar"(%qf, 0.3535533905932738) : (!irfuse.tensor<[1, 4, s0, 64], f32>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %ones = aten.call "aten::ones.default"([%t, %t], dtype = i1, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : (!irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, s0], i1>
  %tril = aten.call "aten::tril.default"(%ones) : (!irfuse.tensor<[s0, s0], i1>) -> !irfuse.tensor<[s0, s0], i1>
  %ninf = aten.call "aten::scalar_tensor.default"(ninf, dtype = f32, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], f32>
  %zero = aten.call "aten::scalar_tensor.default"(0.0, dtype = f32, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], f32>
  %causal = aten.call "aten::where.self"(%tril, %zero, %ninf) : (!irfuse.tensor<[s0, s0], i1>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, s0], f32>
  %ku = aten.call "aten::unsqueeze.default"(%kf, 2) : (!irfuse.tensor<[1, 2, s0, 64], f32>) -> !irfuse.tensor<[1, 2, 1, s0, 64], f32>
  %ke = aten.call "aten::expand.default"(%ku, [1, 2, 2, %t, 64]) : (!irfuse.tensor<[1, 2, 1, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 64], f32>
  %kc = aten.call "aten::clone.default"(%ke, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 64], f32>) -> !irfuse.tensor<[1, 2, 2, s0, 64], f32>
  %kr = aten.call "aten::view.default"(%kc, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 2, 2, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %vu = aten.call "aten::unsqueeze.default"(%vf, 2) : (!irfuse.tensor<[1, 2, s0, 32], f32>) -> !irfuse.tensor<[1, 2, 1, s0, 32], f32>
  %ve = aten.call "aten::expand.default"(%vu, [1, 2, 2, %t, 32]) : (!irfuse.tensor<[1, 2, 1, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 32], f32>
  %vc = aten.call "aten::clone.default"(%ve, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 32], f32>) -> !irfuse.tensor<[1, 2, 2, s0, 32], f32>
  %vr = aten.call "aten::view.default"(%vc, [1, 4, %t, 32]) : (!irfuse.tensor<[1, 2, 2, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %kt = aten.call "aten::transpose.int"(%kr, -2, -1) : (!irfuse.tensor<[1, 4, s0, 64], f32>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %ks = aten.call "aten::mul.Scalar"(%kt, 0.3535533905932738) : (!irfuse.tensor<[1, 4, 64, s0], f32>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %qe = aten.call "aten::expand.default"(%qs, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %q3 = aten.call "aten::view.default"(%qe, [4, %t, 64]) : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 64], f32>
  %ke2 = aten.call "aten::expand.default"(%ks, [1, 4, 64, %t]) : (!irfuse.tensor<[1, 4, 64, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %k3 = aten.call "aten::view.default"(%ke2, [4, 64, %t]) : (!irfuse.tensor<[1, 4, 64, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, 64, s0], f32>
  %bmm = aten.call "aten::bmm.default"(%q3, %k3) : (!irfuse.tensor<[4, s0, 64], f32>, !irfuse.tensor<[4, 64, s0], f32>) -> !irfuse.tensor<[4, s0, s0], f32>
  %sc = aten.call "aten::view.default"(%bmm, [1, 4, %t, %t]) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %add = aten.call "aten::add.Tensor"(%sc, %causal) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.tensor<[s0, s0], f32>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %p = aten.call "aten::_safe_softmax.default"(%add, -1) : (!irfuse.tensor<[1, 4, s0, s0], f32>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %pe = aten.call "aten::expand.default"(%p, [1, 4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %p3 = aten.call "aten::view.default"(%pe, [4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, s0], f32>
  %vre = aten.call "aten::expand.default"(%vr, [1, 4, %t, 32]) : (!irfuse.tensor<[1, 4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %v3 = aten.call "aten::view.default"(%vre, [4, %t, 32]) : (!irfuse.tensor<[1, 4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 32], f32>
  %bmm2 = aten.call "aten::bmm.default"(%p3, %v3) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.tensor<[4, s0, 32], f32>) -> !irfuse.tensor<[4, s0, 32], f32>
  %of = aten.call "aten::view.default"(%bmm2, [1, 4, %t, 32]) : (!irfuse.tensor<[4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %o = aten.call "aten::_to_copy.default"(%of, dtype = bf16) : (!irfuse.tensor<[1, 4, s0, 32], f32>) -> !irfuse.tensor<[1, 4, s0, 32], bf16>
  func.return %o : !irfuse.tensor<[1, 4, s0, 32], bf16>
}

// q and k scaled by different factors: not an attention the op describes.
// CHECK-LABEL: func.func @math_unequal_scales
// CHECK-NOT: attn.attention
// CHECK: func.return
func.func @math_unequal_scales(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 64], bf16>, %k: !irfuse.tensor<[1, 2, s0, 64], bf16>, %v: !irfuse.tensor<[1, 2, s0, 32], bf16>) -> !irfuse.tensor<[1, 4, s0, 32], bf16> {
  %qf = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 4, s0, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %kf = aten.call "aten::_to_copy.default"(%k, dtype = f32) : (!irfuse.tensor<[1, 2, s0, 64], bf16>) -> !irfuse.tensor<[1, 2, s0, 64], f32>
  %vf = aten.call "aten::_to_copy.default"(%v, dtype = f32) : (!irfuse.tensor<[1, 2, s0, 32], bf16>) -> !irfuse.tensor<[1, 2, s0, 32], f32>
  %qs = aten.call "aten::mul.Scalar"(%qf, 0.3535533905932738) : (!irfuse.tensor<[1, 4, s0, 64], f32>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %ones = aten.call "aten::ones.default"([%t, %t], dtype = i1, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : (!irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, s0], i1>
  %tril = aten.call "aten::tril.default"(%ones) : (!irfuse.tensor<[s0, s0], i1>) -> !irfuse.tensor<[s0, s0], i1>
  %ninf = aten.call "aten::scalar_tensor.default"(ninf, dtype = f32, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], f32>
  %zero = aten.call "aten::scalar_tensor.default"(0.0, dtype = f32, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], f32>
  %causal = aten.call "aten::where.self"(%tril, %zero, %ninf) : (!irfuse.tensor<[s0, s0], i1>, !irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, s0], f32>
  %ku = aten.call "aten::unsqueeze.default"(%kf, 2) : (!irfuse.tensor<[1, 2, s0, 64], f32>) -> !irfuse.tensor<[1, 2, 1, s0, 64], f32>
  %ke = aten.call "aten::expand.default"(%ku, [1, 2, 2, %t, 64]) : (!irfuse.tensor<[1, 2, 1, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 64], f32>
  %kc = aten.call "aten::clone.default"(%ke, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 64], f32>) -> !irfuse.tensor<[1, 2, 2, s0, 64], f32>
  %kr = aten.call "aten::view.default"(%kc, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 2, 2, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %vu = aten.call "aten::unsqueeze.default"(%vf, 2) : (!irfuse.tensor<[1, 2, s0, 32], f32>) -> !irfuse.tensor<[1, 2, 1, s0, 32], f32>
  %ve = aten.call "aten::expand.default"(%vu, [1, 2, 2, %t, 32]) : (!irfuse.tensor<[1, 2, 1, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, 2, s0, 32], f32>
  %vc = aten.call "aten::clone.default"(%ve, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, 2, 2, s0, 32], f32>) -> !irfuse.tensor<[1, 2, 2, s0, 32], f32>
  %vr = aten.call "aten::view.default"(%vc, [1, 4, %t, 32]) : (!irfuse.tensor<[1, 2, 2, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %kt = aten.call "aten::transpose.int"(%kr, -2, -1) : (!irfuse.tensor<[1, 4, s0, 64], f32>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %ks = aten.call "aten::mul.Scalar"(%kt, 0.5) : (!irfuse.tensor<[1, 4, 64, s0], f32>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %qe = aten.call "aten::expand.default"(%qs, [1, 4, %t, 64]) : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 64], f32>
  %q3 = aten.call "aten::view.default"(%qe, [4, %t, 64]) : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 64], f32>
  %ke2 = aten.call "aten::expand.default"(%ks, [1, 4, 64, %t]) : (!irfuse.tensor<[1, 4, 64, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, 64, s0], f32>
  %k3 = aten.call "aten::view.default"(%ke2, [4, 64, %t]) : (!irfuse.tensor<[1, 4, 64, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, 64, s0], f32>
  %bmm = aten.call "aten::bmm.default"(%q3, %k3) : (!irfuse.tensor<[4, s0, 64], f32>, !irfuse.tensor<[4, 64, s0], f32>) -> !irfuse.tensor<[4, s0, s0], f32>
  %sc = aten.call "aten::view.default"(%bmm, [1, 4, %t, %t]) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %add = aten.call "aten::add.Tensor"(%sc, %causal) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.tensor<[s0, s0], f32>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %p = aten.call "aten::_safe_softmax.default"(%add, -1) : (!irfuse.tensor<[1, 4, s0, s0], f32>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %pe = aten.call "aten::expand.default"(%p, [1, 4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %p3 = aten.call "aten::view.default"(%pe, [4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, s0], f32>
  %vre = aten.call "aten::expand.default"(%vr, [1, 4, %t, 32]) : (!irfuse.tensor<[1, 4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %v3 = aten.call "aten::view.default"(%vre, [4, %t, 32]) : (!irfuse.tensor<[1, 4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 32], f32>
  %bmm2 = aten.call "aten::bmm.default"(%p3, %v3) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.tensor<[4, s0, 32], f32>) -> !irfuse.tensor<[4, s0, 32], f32>
  %of = aten.call "aten::view.default"(%bmm2, [1, 4, %t, 32]) : (!irfuse.tensor<[4, s0, 32], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 32], f32>
  %o = aten.call "aten::_to_copy.default"(%of, dtype = bf16) : (!irfuse.tensor<[1, 4, s0, 32], f32>) -> !irfuse.tensor<[1, 4, s0, 32], bf16>
  func.return %o : !irfuse.tensor<[1, 4, s0, 32], bf16>
}


// DeepSeek-V2-Lite's MLA prefill (irfuse.models.mla, pad_v): the kv_b projection of the latent,
// its split into k_nope and v, the shared k_pe broadcast and concatenated, v padded to the q/k
// head dim, the layout changes, the SDPA, and the output brought back to [T, H, v_head_dim].
// CHECK-LABEL: func.func @mla
// CHECK-SAME: (%{{.+}}: !irfuse.sym<s0>, %[[Q:.+]]: !irfuse.tensor<[s0, 4, 48], bf16>, %[[C:.+]]: !irfuse.tensor<[s0, 128], bf16>, %[[P:.+]]: !irfuse.tensor<[s0, 1, 16], bf16>, %[[W:.+]]: !irfuse.tensor<[256, 128], bf16>)
// CHECK: %[[O:.+]] = attn.mla_attention %[[Q]], %[[C]], %[[P]], %[[W]] {num_heads = 4 : i64, qk_nope_head_dim = 32 : i64, qk_rope_head_dim = 16 : i64, v_head_dim = 32 : i64, kv_lora_rank = 128 : i64, scale = 0.14433756729740643 : f64, causal = true} : (!irfuse.tensor<[s0, 4, 48], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[s0, 1, 16], bf16>, !irfuse.tensor<[256, 128], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16> decomposition {
// CHECK: "aten::t.default"
// CHECK: "aten::mm.default"
// CHECK: "aten::split_with_sizes.default"
// CHECK: "aten::constant_pad_nd.default"
// CHECK: "aten::_scaled_dot_product_flash_attention_for_cpu.default"
// CHECK: "aten::slice.Tensor"
// CHECK: irfuse.yield
// CHECK: %[[C2:.+]] = aten.call "aten::clone.default"(%[[O]],
func.func @mla(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 4, 48], bf16>, %kv_c: !irfuse.tensor<[s0, 128], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %w: !irfuse.tensor<[256, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16> {
  %wt = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[256, 128], bf16>) -> !irfuse.tensor<[128, 256], bf16>
  %kv = aten.call "aten::mm.default"(%kv_c, %wt) : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %kv3 = aten.call "aten::view.default"(%kv, [-1, 4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k_nope, %v = aten.call tuple "aten::split_with_sizes.default"(%kv3, [32, 32], -1) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.tensor<[s0, 4, 32], bf16>)
  %k_pe4 = aten.call "aten::expand.default"(%k_pe, [-1, 4, -1]) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
  %k = aten.call "aten::cat.default"([%k_nope, %k_pe4], -1) : (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %vp = aten.call "aten::constant_pad_nd.default"(%v, [0, 16], 0.0) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %qt = aten.call "aten::transpose.int"(%q, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %q4 = aten.call "aten::unsqueeze.default"(%qt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %kt = aten.call "aten::transpose.int"(%k, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %k4 = aten.call "aten::unsqueeze.default"(%kt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %vt = aten.call "aten::transpose.int"(%vp, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %v4 = aten.call "aten::unsqueeze.default"(%vt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q4, %k4, %v4, 0.0, true, scale = 0.14433756729740643) : (!irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0, 48], bf16>) -> (!irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  %os = aten.call "aten::squeeze.dim"(%o, 0) : (!irfuse.tensor<[1, 4, s0, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %ot = aten.call "aten::transpose.int"(%os, 0, 1) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %of = aten.call "aten::view.default"(%ot, [%t, -1]) : (!irfuse.tensor<[s0, 4, 48], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 192], bf16>
  %o3 = aten.call "aten::view.default"(%of, [-1, 4, 48]) : (!irfuse.tensor<[s0, 192], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %ov = aten.call "aten::slice.Tensor"(%o3, 2, 0, 32) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %oc = aten.call "aten::clone.default"(%ov, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %out = aten.call "aten::_unsafe_view.default"(%oc, [%t, 128]) : (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return %out : !irfuse.tensor<[s0, 128], bf16>
}

// The same with an explicit mask: not what attn.mla_attention says (token-major MLA has no mask);
// raised as attention, with the remark.
// CHECK-LABEL: func.func @mla_masked
// CHECK-NOT: attn.mla_attention
// CHECK: attn.attention
// CHECK-NOT: attn.mla_attention
// CHECK: func.return
func.func @mla_masked(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 4, 48], bf16>, %kv_c: !irfuse.tensor<[s0, 128], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 16], bf16>, %w: !irfuse.tensor<[256, 128], bf16>, %m: !irfuse.tensor<[1, 1, s0, s0], bf16>) -> !irfuse.tensor<[s0, 128], bf16> {
  %wt = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[256, 128], bf16>) -> !irfuse.tensor<[128, 256], bf16>
  %kv = aten.call "aten::mm.default"(%kv_c, %wt) : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[128, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %kv3 = aten.call "aten::view.default"(%kv, [-1, 4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k_nope, %v = aten.call tuple "aten::split_with_sizes.default"(%kv3, [32, 32], -1) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.tensor<[s0, 4, 32], bf16>)
  %k_pe4 = aten.call "aten::expand.default"(%k_pe, [-1, 4, -1]) : (!irfuse.tensor<[s0, 1, 16], bf16>) -> !irfuse.tensor<[s0, 4, 16], bf16>
  %k = aten.call "aten::cat.default"([%k_nope, %k_pe4], -1) : (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.tensor<[s0, 4, 16], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %vp = aten.call "aten::constant_pad_nd.default"(%v, [0, 16], 0.0) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %qt = aten.call "aten::transpose.int"(%q, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %q4 = aten.call "aten::unsqueeze.default"(%qt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %kt = aten.call "aten::transpose.int"(%k, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %k4 = aten.call "aten::unsqueeze.default"(%kt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %vt = aten.call "aten::transpose.int"(%vp, 0, 1) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %v4 = aten.call "aten::unsqueeze.default"(%vt, 0) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[1, 4, s0, 48], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q4, %k4, %v4, attn_mask = %m, scale = 0.14433756729740643) : (!irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 1, s0, s0], bf16>) -> (!irfuse.tensor<[1, 4, s0, 48], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  %os = aten.call "aten::squeeze.dim"(%o, 0) : (!irfuse.tensor<[1, 4, s0, 48], bf16>) -> !irfuse.tensor<[4, s0, 48], bf16>
  %ot = aten.call "aten::transpose.int"(%os, 0, 1) : (!irfuse.tensor<[4, s0, 48], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %of = aten.call "aten::view.default"(%ot, [%t, -1]) : (!irfuse.tensor<[s0, 4, 48], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 192], bf16>
  %o3 = aten.call "aten::view.default"(%of, [-1, 4, 48]) : (!irfuse.tensor<[s0, 192], bf16>) -> !irfuse.tensor<[s0, 4, 48], bf16>
  %ov = aten.call "aten::slice.Tensor"(%o3, 2, 0, 32) : (!irfuse.tensor<[s0, 4, 48], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %oc = aten.call "aten::clone.default"(%ov, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[s0, 4, 32], bf16>) -> !irfuse.tensor<[s0, 4, 32], bf16>
  %out = aten.call "aten::_unsafe_view.default"(%oc, [%t, 128]) : (!irfuse.tensor<[s0, 4, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return %out : !irfuse.tensor<[s0, 128], bf16>
}


// Hugging Face's DeepSeek-V3 (transformers 5, a real trace trimmed to one layer's attention): the
// latent viewed as one head [B, 1, L, rank], the kv_b projection (raised gemm.matmul) viewed to
// [B, L, H, nope + v] and transposed to SDPA's layout, split into k_nope and v; the key written
// into `new_empty` by two slice_scatters (k_nope, then k_pe expanded to the heads); the mask that
// HF builds; SDPA's CPU math path (v's head dim differs). Batch-major MLA with the bool mask; the
// layout changes after the output stay outside.
// CHECK-LABEL: func.func @hf_deepseek_v3
// CHECK-SAME: (%{{.+}}: !irfuse.sym<s0>, %[[Q:.+]]: !irfuse.tensor<[1, 4, s0, 24], bf16>, %[[C:.+]]: !irfuse.tensor<[1, 1, s0, 32], bf16>, %[[P:.+]]: !irfuse.tensor<[1, 1, s0, 8], bf16>, %[[W:.+]]: !irfuse.tensor<[128, 32], bf16>, %[[M:.+]]: !irfuse.tensor<[1, 1, s0, s0], i1>)
// CHECK-NOT: aten.call
// CHECK: %[[O:.+]] = attn.mla_attention %[[Q]], %[[C]], %[[P]], %[[W]], mask %[[M]] {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64, v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, scale = 0.20412414523193154 : f64, batch_major = true} : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 1, s0, 32], bf16>, !irfuse.tensor<[1, 1, s0, 8], bf16>, !irfuse.tensor<[128, 32], bf16>, !irfuse.tensor<[1, 1, s0, s0], i1>) -> !irfuse.tensor<[1, 4, s0, 16], bf16> decomposition {
// CHECK: gemm.matmul
// CHECK: "aten::transpose.int"
// CHECK: "aten::split_with_sizes.default"
// CHECK: "aten::new_empty.default"
// CHECK: "aten::slice_scatter.default"
// CHECK: "aten::slice_scatter.default"
// CHECK: "aten::where.self"
// CHECK: "aten::_safe_softmax.default"
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %{{.+}} = aten.call "aten::view.default"(%[[O]], [1, -1, %{{.+}}, 16])
func.func @hf_deepseek_v3(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 24], bf16>, %kv_c: !irfuse.tensor<[1, 1, s0, 32], bf16>, %k_pe: !irfuse.tensor<[1, 1, s0, 8], bf16>, %w: !irfuse.tensor<[128, 32], bf16>, %mask: !irfuse.tensor<[1, 1, s0, s0], i1>) -> !irfuse.tensor<[1, s0, 64], bf16> {
  %t_3 = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[128, 32], bf16>) -> !irfuse.tensor<[32, 128], bf16>
  %view_6 = aten.call "aten::view.default"(%kv_c, [%t, 32]) : (!irfuse.tensor<[1, 1, s0, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 32], bf16>
  %mm_6 = gemm.matmul %view_6, %t_3 : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[32, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16> decomposition {
  ^bb0(%0: !irfuse.tensor<[s0, 32], bf16>, %1: !irfuse.tensor<[32, 128], bf16>):
    %mm_7 = aten.call "aten::mm.default"(%0, %1) : (!irfuse.tensor<[s0, 32], bf16>, !irfuse.tensor<[32, 128], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
    irfuse.yield %mm_7 : !irfuse.tensor<[s0, 128], bf16>
  }
  %_unsafe_view_3 = aten.call "aten::_unsafe_view.default"(%mm_6, [1, 1, %t, 128]) : (!irfuse.tensor<[s0, 128], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 1, s0, 128], bf16>
  %view_7 = aten.call "aten::view.default"(%_unsafe_view_3, [1, %t, -1, 32]) : (!irfuse.tensor<[1, 1, s0, 128], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, s0, 4, 32], bf16>
  %transpose_1 = aten.call "aten::transpose.int"(%view_7, 1, 2) : (!irfuse.tensor<[1, s0, 4, 32], bf16>) -> !irfuse.tensor<[1, 4, s0, 32], bf16>
  %split_with_sizes_4, %split_with_sizes_5 = aten.call tuple "aten::split_with_sizes.default"(%transpose_1, [16, 16], -1) : (!irfuse.tensor<[1, 4, s0, 32], bf16>) -> (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>)
  %expand_2 = aten.call "aten::expand.default"(%k_pe, [-1, 4, -1, -1]) : (!irfuse.tensor<[1, 1, s0, 8], bf16>) -> !irfuse.tensor<[1, 4, s0, 8], bf16>
  %new_empty = aten.call "aten::new_empty.default"(%transpose_1, [1, 4, %t, 24], pin_memory = false) : (!irfuse.tensor<[1, 4, s0, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %slice_11 = aten.call "aten::slice.Tensor"(%new_empty, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %copy = aten.call "aten::copy.default"(%slice_11, %split_with_sizes_4) : (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %slice_scatter = aten.call "aten::slice_scatter.default"(%new_empty, %copy, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %slice_12 = aten.call "aten::slice.Tensor"(%slice_scatter, 3, 16, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 8], bf16>
  %copy_1 = aten.call "aten::copy.default"(%slice_12, %expand_2) : (!irfuse.tensor<[1, 4, s0, 8], bf16>, !irfuse.tensor<[1, 4, s0, 8], bf16>) -> !irfuse.tensor<[1, 4, s0, 8], bf16>
  %slice_scatter_1 = aten.call "aten::slice_scatter.default"(%slice_scatter, %copy_1, 3, 16, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 8], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %scalar_tensor = aten.call "aten::scalar_tensor.default"(ninf, dtype = bf16, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], bf16>
  %scalar_tensor_1 = aten.call "aten::scalar_tensor.default"(0.0, dtype = bf16, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : () -> !irfuse.tensor<[], bf16>
  %where = aten.call "aten::where.self"(%mask, %scalar_tensor_1, %scalar_tensor) : (!irfuse.tensor<[1, 1, s0, s0], i1>, !irfuse.tensor<[], bf16>, !irfuse.tensor<[], bf16>) -> !irfuse.tensor<[1, 1, s0, s0], bf16>
  %_to_copy_10 = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], f32>
  %_to_copy_11 = aten.call "aten::_to_copy.default"(%slice_scatter_1, dtype = f32) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], f32>
  %_to_copy_12 = aten.call "aten::_to_copy.default"(%split_with_sizes_5, dtype = f32) : (!irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %mul_20 = aten.call "aten::mul.Scalar"(%_to_copy_10, 0.45180100180492244) : (!irfuse.tensor<[1, 4, s0, 24], f32>) -> !irfuse.tensor<[1, 4, s0, 24], f32>
  %transpose_2 = aten.call "aten::transpose.int"(%_to_copy_11, -2, -1) : (!irfuse.tensor<[1, 4, s0, 24], f32>) -> !irfuse.tensor<[1, 4, 24, s0], f32>
  %mul_21 = aten.call "aten::mul.Scalar"(%transpose_2, 0.45180100180492244) : (!irfuse.tensor<[1, 4, 24, s0], f32>) -> !irfuse.tensor<[1, 4, 24, s0], f32>
  %expand_3 = aten.call "aten::expand.default"(%mul_20, [1, 4, %t, 24]) : (!irfuse.tensor<[1, 4, s0, 24], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 24], f32>
  %view_8 = aten.call "aten::view.default"(%expand_3, [4, %t, 24]) : (!irfuse.tensor<[1, 4, s0, 24], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 24], f32>
  %expand_4 = aten.call "aten::expand.default"(%mul_21, [1, 4, 24, %t]) : (!irfuse.tensor<[1, 4, 24, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, 24, s0], f32>
  %view_9 = aten.call "aten::view.default"(%expand_4, [4, 24, %t]) : (!irfuse.tensor<[1, 4, 24, s0], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, 24, s0], f32>
  %bmm = aten.call "aten::bmm.default"(%view_8, %view_9) : (!irfuse.tensor<[4, s0, 24], f32>, !irfuse.tensor<[4, 24, s0], f32>) -> !irfuse.tensor<[4, s0, s0], f32>
  %view_10 = aten.call "aten::view.default"(%bmm, [1, 4, %t, %t]) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %add_9 = aten.call "aten::add.Tensor"(%view_10, %where) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.tensor<[1, 1, s0, s0], bf16>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %_safe_softmax = aten.call "aten::_safe_softmax.default"(%add_9, -1) : (!irfuse.tensor<[1, 4, s0, s0], f32>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %expand_5 = aten.call "aten::expand.default"(%_safe_softmax, [1, 4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, s0], f32>
  %view_11 = aten.call "aten::view.default"(%expand_5, [4, %t, %t]) : (!irfuse.tensor<[1, 4, s0, s0], f32>, !irfuse.sym<s0>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, s0], f32>
  %expand_6 = aten.call "aten::expand.default"(%_to_copy_12, [1, 4, %t, 16]) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %view_12 = aten.call "aten::view.default"(%expand_6, [4, %t, 16]) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[4, s0, 16], f32>
  %bmm_1 = aten.call "aten::bmm.default"(%view_11, %view_12) : (!irfuse.tensor<[4, s0, s0], f32>, !irfuse.tensor<[4, s0, 16], f32>) -> !irfuse.tensor<[4, s0, 16], f32>
  %view_13 = aten.call "aten::view.default"(%bmm_1, [1, 4, %t, 16]) : (!irfuse.tensor<[4, s0, 16], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %_to_copy_13 = aten.call "aten::_to_copy.default"(%view_13, dtype = bf16) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %view_14 = aten.call "aten::view.default"(%_to_copy_13, [1, -1, %t, 16]) : (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %transpose_3 = aten.call "aten::transpose.int"(%view_14, 1, 2) : (!irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, s0, 4, 16], bf16>
  %clone = aten.call "aten::clone.default"(%transpose_3, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[1, s0, 4, 16], bf16>) -> !irfuse.tensor<[1, s0, 4, 16], bf16>
  %view_15 = aten.call "aten::view.default"(%clone, [1, %t, -1]) : (!irfuse.tensor<[1, s0, 4, 16], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, s0, 64], bf16>
  func.return %view_15 : !irfuse.tensor<[1, s0, 64], bf16>
}

// transformers 4's spelling (a real trace of the same code): the kv_b projection of the 3-D
// latent [B, L, rank], the key by `cat`, v zero-padded to the q/k head dim and the output sliced
// back, batch 2. The op takes the latent with its head dim (an unsqueeze before it); the region
// reads the latent as the model did.
// CHECK-LABEL: func.func @hf4_cat_key
// CHECK-SAME: (%[[Q:.+]]: !irfuse.tensor<[2, 4, 8, 24], bf16>, %[[L:.+]]: !irfuse.tensor<[2, 8, 32], bf16>, %[[P:.+]]: !irfuse.tensor<[2, 1, 8, 8], bf16>, %[[W:.+]]: !irfuse.tensor<[128, 32], bf16>)
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::unsqueeze.default"(%[[L]], -3) : (!irfuse.tensor<[2, 8, 32], bf16>) -> !irfuse.tensor<[2, 1, 8, 32], bf16>
// CHECK-NEXT: %[[O:.+]] = attn.mla_attention %[[Q]], %[[C]], %[[P]], %[[W]] {num_heads = 4 : i64, qk_nope_head_dim = 16 : i64, qk_rope_head_dim = 8 : i64, v_head_dim = 16 : i64, kv_lora_rank = 32 : i64, scale = 3.000000e-01 : f64, causal = true, batch_major = true} : {{.*}} -> !irfuse.tensor<[2, 4, 8, 16], bf16> decomposition {
// CHECK: "aten::view.default"(%[[L]], [16, 32])
// CHECK: "aten::cat.default"
// CHECK: act.pad
// CHECK: "aten::_scaled_dot_product_flash_attention_for_cpu.default"
// CHECK: "aten::slice.Tensor"
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: aten.call "aten::transpose.int"(%[[O]], 1, 2)
func.func @hf4_cat_key(%q: !irfuse.tensor<[2, 4, 8, 24], bf16>, %latent: !irfuse.tensor<[2, 8, 32], bf16>, %k_pe: !irfuse.tensor<[2, 1, 8, 8], bf16>, %w: !irfuse.tensor<[128, 32], bf16>) -> !irfuse.tensor<[2, 8, 64], bf16> {
  %wt = aten.call "aten::t.default"(%w) : (!irfuse.tensor<[128, 32], bf16>) -> !irfuse.tensor<[32, 128], bf16>
  %view = aten.call "aten::view.default"(%latent, [16, 32]) : (!irfuse.tensor<[2, 8, 32], bf16>) -> !irfuse.tensor<[16, 32], bf16>
  %mm = gemm.matmul %view, %wt : (!irfuse.tensor<[16, 32], bf16>, !irfuse.tensor<[32, 128], bf16>) -> !irfuse.tensor<[16, 128], bf16> decomposition {
  ^bb0(%0: !irfuse.tensor<[16, 32], bf16>, %1: !irfuse.tensor<[32, 128], bf16>):
    %mm_1 = aten.call "aten::mm.default"(%0, %1) : (!irfuse.tensor<[16, 32], bf16>, !irfuse.tensor<[32, 128], bf16>) -> !irfuse.tensor<[16, 128], bf16>
    irfuse.yield %mm_1 : !irfuse.tensor<[16, 128], bf16>
  }
  %_unsafe_view = aten.call "aten::_unsafe_view.default"(%mm, [2, 8, 128]) : (!irfuse.tensor<[16, 128], bf16>) -> !irfuse.tensor<[2, 8, 128], bf16>
  %view_1 = aten.call "aten::view.default"(%_unsafe_view, [2, 8, -1, 32]) : (!irfuse.tensor<[2, 8, 128], bf16>) -> !irfuse.tensor<[2, 8, 4, 32], bf16>
  %transpose = aten.call "aten::transpose.int"(%view_1, 1, 2) : (!irfuse.tensor<[2, 8, 4, 32], bf16>) -> !irfuse.tensor<[2, 4, 8, 32], bf16>
  %split_with_sizes, %split_with_sizes_1 = aten.call tuple "aten::split_with_sizes.default"(%transpose, [16, 16], -1) : (!irfuse.tensor<[2, 4, 8, 32], bf16>) -> (!irfuse.tensor<[2, 4, 8, 16], bf16>, !irfuse.tensor<[2, 4, 8, 16], bf16>)
  %expand = aten.call "aten::expand.default"(%k_pe, [2, 4, 8, -1]) : (!irfuse.tensor<[2, 1, 8, 8], bf16>) -> !irfuse.tensor<[2, 4, 8, 8], bf16>
  %cat = aten.call "aten::cat.default"([%split_with_sizes, %expand], -1) : (!irfuse.tensor<[2, 4, 8, 16], bf16>, !irfuse.tensor<[2, 4, 8, 8], bf16>) -> !irfuse.tensor<[2, 4, 8, 24], bf16>
  %constant_pad_nd = act.pad %split_with_sizes_1 {low = 0 : i64, high = 8 : i64} : (!irfuse.tensor<[2, 4, 8, 16], bf16>) -> !irfuse.tensor<[2, 4, 8, 24], bf16> decomposition {
  ^bb0(%2: !irfuse.tensor<[2, 4, 8, 16], bf16>):
    %constant_pad_nd_1 = aten.call "aten::constant_pad_nd.default"(%2, [0, 8], 0.0) : (!irfuse.tensor<[2, 4, 8, 16], bf16>) -> !irfuse.tensor<[2, 4, 8, 24], bf16>
    irfuse.yield %constant_pad_nd_1 : !irfuse.tensor<[2, 4, 8, 24], bf16>
  }
  %_scaled_dot_product_flash_attention_for_cpu, %_scaled_dot_product_flash_attention_for_cpu_1 = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %cat, %constant_pad_nd, 0.0, true, scale = 0.3) : (!irfuse.tensor<[2, 4, 8, 24], bf16>, !irfuse.tensor<[2, 4, 8, 24], bf16>, !irfuse.tensor<[2, 4, 8, 24], bf16>) -> (!irfuse.tensor<[2, 4, 8, 24], bf16>, !irfuse.tensor<[2, 4, 8], f32>)
  %slice = aten.call "aten::slice.Tensor"(%_scaled_dot_product_flash_attention_for_cpu, 3, 0, 16) : (!irfuse.tensor<[2, 4, 8, 24], bf16>) -> !irfuse.tensor<[2, 4, 8, 16], bf16>
  %transpose_1 = aten.call "aten::transpose.int"(%slice, 1, 2) : (!irfuse.tensor<[2, 4, 8, 16], bf16>) -> !irfuse.tensor<[2, 8, 4, 16], bf16>
  %clone = aten.call "aten::clone.default"(%transpose_1, memory_format = #aten.memory_format<"torch.contiguous_format">) : (!irfuse.tensor<[2, 8, 4, 16], bf16>) -> !irfuse.tensor<[2, 8, 4, 16], bf16>
  %_unsafe_view_1 = aten.call "aten::_unsafe_view.default"(%clone, [2, 8, 64]) : (!irfuse.tensor<[2, 8, 4, 16], bf16>) -> !irfuse.tensor<[2, 8, 64], bf16>
  func.return %_unsafe_view_1 : !irfuse.tensor<[2, 8, 64], bf16>
}

// A key written as Hugging Face writes it, but with a rope piece that `copy` casts (f32 into
// bf16): not MLA's key as the op states it; plain attention.
// CHECK-LABEL: func.func @hf_scatter_casts
// CHECK-NOT: attn.mla_attention
// CHECK: attn.attention
// CHECK-NOT: attn.mla_attention
func.func @hf_scatter_casts(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 24], bf16>, %kv: !irfuse.tensor<[1, 4, s0, 32], bf16>, %k_pe: !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 24], bf16> {
  %k_nope, %v = aten.call tuple "aten::split_with_sizes.default"(%kv, [16, 16], -1) : (!irfuse.tensor<[1, 4, s0, 32], bf16>) -> (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>)
  %k_pe4 = aten.call "aten::expand.default"(%k_pe, [-1, 4, -1, -1]) : (!irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %e = aten.call "aten::new_empty.default"(%kv, [1, 4, %t, 24], pin_memory = false) : (!irfuse.tensor<[1, 4, s0, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %s0 = aten.call "aten::slice.Tensor"(%e, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %c0 = aten.call "aten::copy.default"(%s0, %k_nope) : (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %k0 = aten.call "aten::slice_scatter.default"(%e, %c0, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %s1 = aten.call "aten::slice.Tensor"(%k0, 3, 16, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 8], bf16>
  %c1 = aten.call "aten::copy.default"(%s1, %k_pe4) : (!irfuse.tensor<[1, 4, s0, 8], bf16>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], bf16>
  %k = aten.call "aten::slice_scatter.default"(%k0, %c1, 3, 16, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 8], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %vp = aten.call "aten::constant_pad_nd.default"(%v, [0, 8], 0.0) : (!irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %k, %vp, 0.0, true, scale = 0.2) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>) -> (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  func.return %o : !irfuse.tensor<[1, 4, s0, 24], bf16>
}

// A key whose two written pieces leave a column of `new_empty` unwritten: plain attention.
// CHECK-LABEL: func.func @hf_scatter_gap
// CHECK-NOT: attn.mla_attention
// CHECK: attn.attention
// CHECK-NOT: attn.mla_attention
func.func @hf_scatter_gap(%t: !irfuse.sym<s0>, %q: !irfuse.tensor<[1, 4, s0, 24], bf16>, %kv: !irfuse.tensor<[1, 4, s0, 32], bf16>, %k_pe: !irfuse.tensor<[1, 1, s0, 7], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16> {
  %k_nope, %v = aten.call tuple "aten::split_with_sizes.default"(%kv, [16, 16], -1) : (!irfuse.tensor<[1, 4, s0, 32], bf16>) -> (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>)
  %k_pe4 = aten.call "aten::expand.default"(%k_pe, [-1, 4, -1, -1]) : (!irfuse.tensor<[1, 1, s0, 7], bf16>) -> !irfuse.tensor<[1, 4, s0, 7], bf16>
  %e = aten.call "aten::new_empty.default"(%kv, [1, 4, %t, 24], pin_memory = false) : (!irfuse.tensor<[1, 4, s0, 32], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %s0 = aten.call "aten::slice.Tensor"(%e, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %c0 = aten.call "aten::copy.default"(%s0, %k_nope) : (!irfuse.tensor<[1, 4, s0, 16], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 16], bf16>
  %k0 = aten.call "aten::slice_scatter.default"(%e, %c0, 3, 0, 16) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %s1 = aten.call "aten::slice.Tensor"(%k0, 3, 17, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>) -> !irfuse.tensor<[1, 4, s0, 7], bf16>
  %c1 = aten.call "aten::copy.default"(%s1, %k_pe4) : (!irfuse.tensor<[1, 4, s0, 7], bf16>, !irfuse.tensor<[1, 4, s0, 7], bf16>) -> !irfuse.tensor<[1, 4, s0, 7], bf16>
  %k = aten.call "aten::slice_scatter.default"(%k0, %c1, 3, 17, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 7], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %vp = aten.call "aten::constant_pad_nd.default"(%v, [0, 8], 0.0) : (!irfuse.tensor<[1, 4, s0, 16], bf16>) -> !irfuse.tensor<[1, 4, s0, 24], bf16>
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %k, %vp, 0.0, true, scale = 0.2) : (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0, 24], bf16>) -> (!irfuse.tensor<[1, 4, s0, 24], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  func.return %o : !irfuse.tensor<[1, 4, s0, 24], bf16>
}

// Not raised: dropout; the logsumexp used.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT: attn.
// CHECK: func.return
func.func @negatives(%q: !irfuse.tensor<[1, 4, s0, 64], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>) {
  %o, %lse = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %q, %q, 0.1, true) : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  %o2, %lse2 = aten.call tuple "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%o, %q, %q, 0.0, true) : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0, 64], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>)
  func.return %o2, %lse2 : !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 4, s0], f32>
}

// Multi-query attention (old-architecture Falcon, Hugging Face) through SDPA's math fallback on
// the CPU (trimmed from a real dump): the one k/v head is expanded to the 4 heads before each
// bmm. That `expand` of a size-1 head dim gives every head the same data: GQA with one k/v head,
// the op takes the one-head k and v.
// CHECK-LABEL: func.func @multi_query_math
// CHECK-SAME: (%{{[^:]+}}: !irfuse.sym<s27>, %[[Q:[^:]+]]: !irfuse.tensor<[1, 4, s27, 16], bf16>, %[[K:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], bf16>, %[[V:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], bf16>, %[[M:[^:]+]]: !irfuse.tensor<[1, 1, s27, s27], bf16>)
// CHECK-NEXT: %[[O:.+]] = attn.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {scale = 2.500000e-01 : f64} : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, s27], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16> decomposition {
// CHECK: aten.call "aten::expand.default"(%{{.+}}, [1, 4, 16, %{{.+}}]) : (!irfuse.tensor<[1, 1, 16, s27], f32>
// CHECK: aten.call "aten::expand.default"(%{{.+}}, [1, 4, %{{.+}}, 16]) : (!irfuse.tensor<[1, 1, s27, 16], f32>
// CHECK: func.return %[[O]]
func.func @multi_query_math(%s: !irfuse.sym<s27>, %q: !irfuse.tensor<[1, 4, s27, 16], bf16>, %k: !irfuse.tensor<[1, 1, s27, 16], bf16>, %v: !irfuse.tensor<[1, 1, s27, 16], bf16>, %mask: !irfuse.tensor<[1, 1, s27, s27], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16> {
  %q32 = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %k32 = aten.call "aten::_to_copy.default"(%k, dtype = f32) : (!irfuse.tensor<[1, 1, s27, 16], bf16>) -> !irfuse.tensor<[1, 1, s27, 16], f32>
  %v32 = aten.call "aten::_to_copy.default"(%v, dtype = f32) : (!irfuse.tensor<[1, 1, s27, 16], bf16>) -> !irfuse.tensor<[1, 1, s27, 16], f32>
  %qs = aten.call "aten::mul.Scalar"(%q32, 0.5) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %kt = aten.call "aten::transpose.int"(%k32, -2, -1) : (!irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 1, 16, s27], f32>
  %ks = aten.call "aten::mul.Scalar"(%kt, 0.5) : (!irfuse.tensor<[1, 1, 16, s27], f32>) -> !irfuse.tensor<[1, 1, 16, s27], f32>
  %qe = aten.call "aten::expand.default"(%qs, [1, 4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %qv = aten.call "aten::view.default"(%qe, [4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, 16], f32>
  %ke = aten.call "aten::expand.default"(%ks, [1, 4, 16, %s]) : (!irfuse.tensor<[1, 1, 16, s27], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, 16, s27], f32>
  %kv = aten.call "aten::view.default"(%ke, [4, 16, %s]) : (!irfuse.tensor<[1, 4, 16, s27], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, 16, s27], f32>
  %bmm = aten.call "aten::bmm.default"(%qv, %kv) : (!irfuse.tensor<[4, s27, 16], f32>, !irfuse.tensor<[4, 16, s27], f32>) -> !irfuse.tensor<[4, s27, s27], f32>
  %sc = aten.call "aten::view.default"(%bmm, [1, 4, %s, %s]) : (!irfuse.tensor<[4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %sm = aten.call "aten::add.Tensor"(%sc, %mask) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.tensor<[1, 1, s27, s27], bf16>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %p = aten.call "aten::_safe_softmax.default"(%sm, -1) : (!irfuse.tensor<[1, 4, s27, s27], f32>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %pe = aten.call "aten::expand.default"(%p, [1, 4, %s, %s]) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %pv = aten.call "aten::view.default"(%pe, [4, %s, %s]) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, s27], f32>
  %ve = aten.call "aten::expand.default"(%v32, [1, 4, %s, 16]) : (!irfuse.tensor<[1, 1, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %vv = aten.call "aten::view.default"(%ve, [4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, 16], f32>
  %o = aten.call "aten::bmm.default"(%pv, %vv) : (!irfuse.tensor<[4, s27, s27], f32>, !irfuse.tensor<[4, s27, 16], f32>) -> !irfuse.tensor<[4, s27, 16], f32>
  %ov = aten.call "aten::view.default"(%o, [1, 4, %s, 16]) : (!irfuse.tensor<[4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %out = aten.call "aten::_to_copy.default"(%ov, dtype = bf16) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  func.return %out : !irfuse.tensor<[1, 4, s27, 16], bf16>
}

// The same with q's one head broadcast to k's four: not GQA (only k and v may be shared).
// CHECK-LABEL: func.func @broadcast_query
// CHECK-NOT: attn.attention
// CHECK: func.return
func.func @broadcast_query(%s: !irfuse.sym<s27>, %q: !irfuse.tensor<[1, 1, s27, 16], bf16>, %k: !irfuse.tensor<[1, 4, s27, 16], bf16>, %v: !irfuse.tensor<[1, 4, s27, 16], bf16>, %mask: !irfuse.tensor<[1, 1, s27, s27], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16> {
  %q32 = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 1, s27, 16], bf16>) -> !irfuse.tensor<[1, 1, s27, 16], f32>
  %k32 = aten.call "aten::_to_copy.default"(%k, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %v32 = aten.call "aten::_to_copy.default"(%v, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %qs = aten.call "aten::mul.Scalar"(%q32, 0.5) : (!irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 1, s27, 16], f32>
  %kt = aten.call "aten::transpose.int"(%k32, -2, -1) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, 16, s27], f32>
  %ks = aten.call "aten::mul.Scalar"(%kt, 0.5) : (!irfuse.tensor<[1, 4, 16, s27], f32>) -> !irfuse.tensor<[1, 4, 16, s27], f32>
  %qe = aten.call "aten::expand.default"(%qs, [1, 4, %s, 16]) : (!irfuse.tensor<[1, 1, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %qv = aten.call "aten::view.default"(%qe, [4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, 16], f32>
  %ke = aten.call "aten::expand.default"(%ks, [1, 4, 16, %s]) : (!irfuse.tensor<[1, 4, 16, s27], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, 16, s27], f32>
  %kv = aten.call "aten::view.default"(%ke, [4, 16, %s]) : (!irfuse.tensor<[1, 4, 16, s27], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, 16, s27], f32>
  %bmm = aten.call "aten::bmm.default"(%qv, %kv) : (!irfuse.tensor<[4, s27, 16], f32>, !irfuse.tensor<[4, 16, s27], f32>) -> !irfuse.tensor<[4, s27, s27], f32>
  %sc = aten.call "aten::view.default"(%bmm, [1, 4, %s, %s]) : (!irfuse.tensor<[4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %sm = aten.call "aten::add.Tensor"(%sc, %mask) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.tensor<[1, 1, s27, s27], bf16>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %p = aten.call "aten::_safe_softmax.default"(%sm, -1) : (!irfuse.tensor<[1, 4, s27, s27], f32>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %pe = aten.call "aten::expand.default"(%p, [1, 4, %s, %s]) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, s27], f32>
  %pv = aten.call "aten::view.default"(%pe, [4, %s, %s]) : (!irfuse.tensor<[1, 4, s27, s27], f32>, !irfuse.sym<s27>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, s27], f32>
  %ve = aten.call "aten::expand.default"(%v32, [1, 4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %vv = aten.call "aten::view.default"(%ve, [4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[4, s27, 16], f32>
  %o = aten.call "aten::bmm.default"(%pv, %vv) : (!irfuse.tensor<[4, s27, s27], f32>, !irfuse.tensor<[4, s27, 16], f32>) -> !irfuse.tensor<[4, s27, 16], f32>
  %ov = aten.call "aten::view.default"(%o, [1, 4, %s, 16]) : (!irfuse.tensor<[4, s27, 16], f32>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %out = aten.call "aten::_to_copy.default"(%ov, dtype = bf16) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  func.return %out : !irfuse.tensor<[1, 4, s27, 16], bf16>
}
