// RUN: irfuse-opt %s -p enable-qk-norm-rope-fusion | filecheck %s
// RUN: irfuse-opt %s -p enable-qk-norm-rope-fusion,select-kernels | filecheck %s --check-prefix=KERNEL

// vLLM's layout: per-head norms of q [T, 4, 64] and k [T, 2, 64], RoPE from the cos/sin cache:
// one op with the norm's eps and the rope's style and dims as attributes.
// CHECK-LABEL: func.func @vllm_layout
// CHECK:       %[[Q:.+]], %[[K:.+]] = fused.qk_norm_rope %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {eps = 1.000000e-06 : f64, is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>)
// CHECK-NOT:   norm.rms_norm
// CHECK-NOT:   attn.rope
// CHECK:       func.return %[[Q]], %[[K]]
// KERNEL-LABEL: func.func @vllm_layout
// KERNEL:      kernel.call impl "reference" tuple "irfuse::qk_norm_rope.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, 1.0e-06, true, 64)
func.func @vllm_layout(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  func.return %qr, %kr : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>
}

// Hugging Face's layout: the norms run on [1, T, H, D], the rope on the transposed [1, H, T, D]
// with cos and sin [1, 1, T, D]: the transposes now view the norms' inputs, and the fused op
// takes the rope's tables. GPT-J style with a partial rotary dim is an attribute like any other.
// CHECK-LABEL: func.func @hf_layout
// CHECK:       %[[QT:.+]] = aten.call "aten::transpose.int"(%{{.*}}, 1, 2) : (!irfuse.tensor<[1, s0, 4, 64], bf16>)
// CHECK:       %[[KT:.+]] = aten.call "aten::transpose.int"(%{{.*}}, 1, 2) : (!irfuse.tensor<[1, s0, 2, 64], bf16>)
// CHECK:       fused.qk_norm_rope %[[QT]], %[[KT]], %{{.*}}, %{{.*}}, cos %{{.*}}, sin %{{[^ ]+}} {eps = 1.000000e-05 : f64, is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64}
// CHECK-NOT:   norm.rms_norm
// KERNEL-LABEL: func.func @hf_layout
// KERNEL:      kernel.call impl "reference" tuple "irfuse::qk_norm_rope.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, %{{.*}}, %{{.*}}, 1.0e-05, false, 32)
func.func @hf_layout(%q: !irfuse.tensor<[1, s0, 4, 64], bf16>, %k: !irfuse.tensor<[1, s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %cos: !irfuse.tensor<[1, 1, s0, 32], bf16>, %sin: !irfuse.tensor<[1, 1, s0, 32], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[1, s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[1, s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[1, s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[1, s0, 2, 64], bf16>
  %qt = aten.call "aten::transpose.int"(%qn, 1, 2) : (!irfuse.tensor<[1, s0, 4, 64], bf16>) -> !irfuse.tensor<[1, 4, s0, 64], bf16>
  %kt = aten.call "aten::transpose.int"(%kn, 1, 2) : (!irfuse.tensor<[1, s0, 2, 64], bf16>) -> !irfuse.tensor<[1, 2, s0, 64], bf16>
  %qr, %kr = attn.rope %qt, k %kt, cos %cos, sin %sin {is_neox = false, rotary_dim = 32 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>, !irfuse.tensor<[1, 1, s0, 32], bf16>, !irfuse.tensor<[1, 1, s0, 32], bf16>) -> (!irfuse.tensor<[1, 4, s0, 64], bf16>, k_out !irfuse.tensor<[1, 2, s0, 64], bf16>)
  func.return %qr, %kr : !irfuse.tensor<[1, 4, s0, 64], bf16>, !irfuse.tensor<[1, 2, s0, 64], bf16>
}

// Not fused: only q is normalized; q and k with different eps; a norm over all heads (OLMo2)
// viewed as heads after it; a normed q that is also returned.
// CHECK-LABEL: func.func @negatives
// CHECK-NOT:   fused.qk_norm_rope
// CHECK:       func.return
func.func @negatives(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %qf: !irfuse.tensor<[s0, 256], bf16>, %wf: !irfuse.tensor<[256], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>) {
  %q1 = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %r1, %rk1 = attn.rope %q1, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %q2 = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k2 = norm.rms_norm %k, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %r2, %rk2 = attn.rope %q2, k %k2, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %n3 = norm.rms_norm %qf, weight %wf {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %q3 = aten.call "aten::view.default"(%n3, [-1, 4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k3 = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %r3, %rk3 = attn.rope %q3, k %k3, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %q4 = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k4 = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %r4, %rk4 = attn.rope %q4, k %k4, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  func.return %r1, %r2, %r3, %r4, %q4 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>
}

// vLLM's `_C` ops as vLLM compiles them (auto_functionalized v1): the norms' outputs viewed back
// to [T, H * D], the raised `_C` rotary unflattening them to heads, and its region reading the
// flat views themselves. The norms are seen through both views (each head's row stays whole),
// the views now view the norms' inputs, and the rope's region goes with it.
// CHECK-LABEL: func.func @vllm_c_ops_v1
// CHECK:       %[[QF:.+]] = aten.call "aten::view.default"(%q, [-1, 256]) : (!irfuse.tensor<[s0, 4, 64], bf16>)
// CHECK:       %[[KF:.+]] = aten.call "aten::view.default"(%k, [-1, 128]) : (!irfuse.tensor<[s0, 2, 64], bf16>)
// CHECK:       %[[QH:.+]] = aten.call "aten::unflatten.int"(%[[QF]], 1, [4, 64])
// CHECK:       %[[KH:.+]] = aten.call "aten::unflatten.int"(%[[KF]], 1, [2, 64])
// CHECK:       %[[QR:.+]], %[[KR:.+]] = fused.qk_norm_rope %[[QH]], %[[KH]], %qw, %kw, positions %pos, cos_sin_cache %cache {eps = 1.000000e-06 : f64, is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64}
// CHECK-NOT:   norm.rms_norm
// CHECK-NOT:   attn.rope
// CHECK-NOT:   hop:auto_functionalized
// CHECK:       aten.call "aten::flatten.using_ints"(%[[QR]], 1, 2)
// CHECK:       aten.call "aten::flatten.using_ints"(%[[KR]], 1, 2)
// KERNEL-LABEL: func.func @vllm_c_ops_v1
// KERNEL:      kernel.call impl "reference" tuple "irfuse::qk_norm_rope.default"
func.func @vllm_c_ops_v1(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 128], bf16>) {
  %qn = norm.rms_norm %q, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qf = aten.call "aten::view.default"(%qn, [-1, 256]) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %kf = aten.call "aten::view.default"(%kn, [-1, 128]) : (!irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  %qh = aten.call "aten::unflatten.int"(%qf, 1, [4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kh = aten.call "aten::unflatten.int"(%kf, 1, [2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qh, k %kh, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>) decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 4, 64], bf16>, %b: !irfuse.tensor<[s0, 2, 64], bf16>, %p: !irfuse.tensor<[s0], i64>, %c: !irfuse.tensor<[4096, 64], bf16>):
    %none, %qo, %ko = aten.call tuple "hop:auto_functionalized"(#aten.target<"_C::rotary_embedding.default">, positions = %p, query = %qf, key = %kf, head_size = 64, cos_sin_cache = %c, is_neox = true) : (!irfuse.tensor<[s0], i64>, !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 128], bf16>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.opaque<"NoneType">, !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 128], bf16>)
    %qoh = aten.call "aten::unflatten.int"(%qo, 1, [4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
    %koh = aten.call "aten::unflatten.int"(%ko, 1, [2, 64]) : (!irfuse.tensor<[s0, 128], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
    irfuse.yield %qoh, %koh : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>
  }
  %qrf = aten.call "aten::flatten.using_ints"(%qr, 1, 2) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %krf = aten.call "aten::flatten.using_ints"(%kr, 1, 2) : (!irfuse.tensor<[s0, 2, 64], bf16>) -> !irfuse.tensor<[s0, 128], bf16>
  func.return %qrf, %krf : !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 128], bf16>
}

// Not fused (each a remark): the flat view of q's norm also returned (only the rope's unflatten
// and its own region may read it); q's norm viewed to [T, 2, 128] and unflattened to heads of 64
// (a view whose rows are two heads, fine) but then q transposed in its last dim (each head's row
// no longer whole).
// CHECK-LABEL: func.func @vllm_c_ops_v1_negatives
// CHECK-NOT:   fused.qk_norm_rope
// CHECK:       func.return
func.func @vllm_c_ops_v1_negatives(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>) {
  %q1 = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k1 = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qf1 = aten.call "aten::view.default"(%q1, [-1, 256]) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %qh1 = aten.call "aten::unflatten.int"(%qf1, 1, [4, 64]) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %r1, %rk1 = attn.rope %qh1, k %k1, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  %q2 = norm.rms_norm %q, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %k2 = norm.rms_norm %k, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qv2 = aten.call "aten::view.default"(%q2, [-1, 2, 128]) : (!irfuse.tensor<[s0, 4, 64], bf16>) -> !irfuse.tensor<[s0, 2, 128], bf16>
  %qh2 = aten.call "aten::unflatten.int"(%qv2, 2, [2, 64]) : (!irfuse.tensor<[s0, 2, 128], bf16>) -> !irfuse.tensor<[s0, 2, 2, 64], bf16>
  %qt2 = aten.call "aten::transpose.int"(%qh2, 2, 3) : (!irfuse.tensor<[s0, 2, 2, 64], bf16>) -> !irfuse.tensor<[s0, 2, 64, 2], bf16>
  %qs2 = aten.call "aten::view.default"(%qt2, [-1, 4, 64]) : (!irfuse.tensor<[s0, 2, 64, 2], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %r2, %rk2 = attn.rope %qs2, k %k2, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  func.return %r1, %qf1, %r2 : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 256], bf16>, !irfuse.tensor<[s0, 4, 64], bf16>
}

// Qwen3-VL's multimodal rope (vLLM's ROCm op, raised): positions [3, T], interleaved sections.
// The fused op carries the sections, and its kernel call passes them: the kernel picks each
// channel's position row itself (no per-token tables are made first).
// CHECK-LABEL: func.func @multimodal
// CHECK:       fused.qk_norm_rope %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {eps = 1.000000e-06 : f64, is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64, mrope_section = array<i64: 12, 10, 10>, mrope_interleaved}
// CHECK-NOT:   attn.rope
// KERNEL-LABEL: func.func @multimodal
// KERNEL:      kernel.call impl "reference" tuple "irfuse::qk_norm_rope.default"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, none, none, 1.0e-06, true, 64, mrope_section = [12, 10, 10], mrope_interleaved = true)
func.func @multimodal(%q: !irfuse.tensor<[s0, 4, 64], bf16>, %k: !irfuse.tensor<[s0, 2, 64], bf16>, %qw: !irfuse.tensor<[64], bf16>, %kw: !irfuse.tensor<[64], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>) {
  %qn = norm.rms_norm %q, weight %qw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 4, 64], bf16>
  %kn = norm.rms_norm %k, weight %kw {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 2, 64], bf16>
  %qr, %kr = attn.rope %qn, k %kn, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64, mrope_section = array<i64: 12, 10, 10>, mrope_interleaved} : (!irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>, !irfuse.tensor<[3, s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 4, 64], bf16>, k_out !irfuse.tensor<[s0, 2, 64], bf16>)
  func.return %qr, %kr : !irfuse.tensor<[s0, 4, 64], bf16>, !irfuse.tensor<[s0, 2, 64], bf16>
}
