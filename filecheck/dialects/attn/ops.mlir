// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// CHECK-LABEL: func.func @attention
func.func @attention(%q: !irfuse.tensor<[1, 32, s0, 128], bf16>, %k: !irfuse.tensor<[1, 8, s0, 128], bf16>, %v: !irfuse.tensor<[1, 8, s0, 128], bf16>, %mask: !irfuse.tensor<[1, 1, s0, s0], i1>, %q3: !irfuse.tensor<[4, 16, 64], f32>, %k3: !irfuse.tensor<[4, 24, 64], f32>, %v3: !irfuse.tensor<[4, 24, 32], f32>) {
  // Causal GQA (32 query heads on 8 kv heads) with a symbolic length.
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 6.250000e-02 : f64, causal = true} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  %o = attn.attention %q, %k, %v {scale = 0.0625 : f64, causal = true} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  // A broadcast bool mask; causal = false is the default and is not printed.
  // CHECK-NEXT: attn.attention %{{.*}}, %{{.*}}, %{{.*}}, mask %{{[^ ]+}} {scale = 6.250000e-02 : f64} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 1, s0, s0], i1>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  %om = attn.attention %q, %k, %v, mask %mask {scale = 0.0625 : f64, causal = false} : (!irfuse.tensor<[1, 32, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 8, s0, 128], bf16>, !irfuse.tensor<[1, 1, s0, s0], i1>) -> !irfuse.tensor<[1, 32, s0, 128], bf16>
  // Rank 3 (no batch), cross-attention lengths, a v head dim of its own.
  // CHECK-NEXT: attn.attention %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 1.250000e-01 : f64} : (!irfuse.tensor<[4, 16, 64], f32>, !irfuse.tensor<[4, 24, 64], f32>, !irfuse.tensor<[4, 24, 32], f32>) -> !irfuse.tensor<[4, 16, 32], f32>
  %o3 = attn.attention %q3, %k3, %v3 {scale = 0.125 : f64} : (!irfuse.tensor<[4, 16, 64], f32>, !irfuse.tensor<[4, 24, 64], f32>, !irfuse.tensor<[4, 24, 32], f32>) -> !irfuse.tensor<[4, 16, 32], f32>
  func.return
}

// CHECK-LABEL: func.func @mla
func.func @mla(%q: !irfuse.tensor<[s0, 16, 192], bf16>, %kv_c: !irfuse.tensor<[s0, 512], bf16>, %k_pe: !irfuse.tensor<[s0, 1, 64], bf16>, %w: !irfuse.tensor<[4096, 512], bf16>, %qb: !irfuse.tensor<[2, 16, s0, 192], bf16>, %cb: !irfuse.tensor<[2, 1, s1, 512], bf16>, %pb: !irfuse.tensor<[2, 1, s1, 64], bf16>, %m: !irfuse.tensor<[2, 1, s0, s1], i1>) {
  // Token-major (vLLM's interface); batch_major = false is the default and is not printed.
  // CHECK: attn.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 6.250000e-02 : f64, causal = true} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  %o = attn.mla_attention %q, %kv_c, %k_pe, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, causal = true, batch_major = false} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[s0, 16, 128], bf16>
  // Batch-major (Hugging Face's layout): single-head latent and k_pe, a bool mask, q and k of
  // different lengths (a KV cache).
  // CHECK-NEXT: attn.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, mask %{{[^ ]+}} {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 6.250000e-02 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s1, 512], bf16>, !irfuse.tensor<[2, 1, s1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[2, 1, s0, s1], i1>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  %ob = attn.mla_attention %qb, %cb, %pb, %w, mask %m {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s1, 512], bf16>, !irfuse.tensor<[2, 1, s1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>, !irfuse.tensor<[2, 1, s0, s1], i1>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  // CHECK-NEXT: attn.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} {{{.*}}, causal = true, batch_major = true} : {{.*}} -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  %oc = attn.mla_attention %qb, %cb, %pb, %w {num_heads = 16 : i64, qk_nope_head_dim = 128 : i64, qk_rope_head_dim = 64 : i64, v_head_dim = 128 : i64, kv_lora_rank = 512 : i64, scale = 0.0625 : f64, causal = true, batch_major = true} : (!irfuse.tensor<[2, 16, s0, 192], bf16>, !irfuse.tensor<[2, 1, s1, 512], bf16>, !irfuse.tensor<[2, 1, s1, 64], bf16>, !irfuse.tensor<[4096, 512], bf16>) -> !irfuse.tensor<[2, 16, s0, 128], bf16>
  func.return
}

// CHECK-LABEL: func.func @rope
func.func @rope(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %pos: !irfuse.tensor<[s0], i64>, %cache: !irfuse.tensor<[4096, 64], bf16>, %qh: !irfuse.tensor<[1, 4, s0, 64], f32>, %kh: !irfuse.tensor<[1, 2, s0, 64], f32>, %cos: !irfuse.tensor<[1, 1, s0, 64], f32>, %sin: !irfuse.tensor<[1, 1, s0, 64], f32>) {
  // vLLM's form: positions and a cos/sin cache; a partial rotary dim (64 of 128), GPT-J style.
  // CHECK: %{{.*}}, %{{.*}} = attn.rope %{{.*}}, k %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {is_neox = false, rotary_dim = 64 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, k_out !irfuse.tensor<[s0, 8, 128], bf16>)
  %qo, %ko = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = false, rotary_dim = 64 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, k_out !irfuse.tensor<[s0, 8, 128], bf16>)
  // q only.
  // CHECK-NEXT: attn.rope %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {is_neox = true, rotary_dim = 64 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %qo2 = attn.rope %q, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 64 : i64, head_dim = 128 : i64} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0], i64>, !irfuse.tensor<[4096, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  // Hugging Face's form: cos and sin, in the SDPA layout.
  // CHECK-NEXT: attn.rope %{{.*}}, k %{{.*}}, cos %{{.*}}, sin %{{[^ ]+}} {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.tensor<[1, 2, s0, 64], f32>, !irfuse.tensor<[1, 1, s0, 64], f32>, !irfuse.tensor<[1, 1, s0, 64], f32>) -> (!irfuse.tensor<[1, 4, s0, 64], f32>, k_out !irfuse.tensor<[1, 2, s0, 64], f32>)
  %qo3, %ko3 = attn.rope %qh, k %kh, cos %cos, sin %sin {is_neox = true, rotary_dim = 64 : i64, head_dim = 64 : i64} : (!irfuse.tensor<[1, 4, s0, 64], f32>, !irfuse.tensor<[1, 2, s0, 64], f32>, !irfuse.tensor<[1, 1, s0, 64], f32>, !irfuse.tensor<[1, 1, s0, 64], f32>) -> (!irfuse.tensor<[1, 4, s0, 64], f32>, k_out !irfuse.tensor<[1, 2, s0, 64], f32>)
  func.return
}

// CHECK-LABEL: func.func @multimodal_rope
func.func @multimodal_rope(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %cache: !irfuse.tensor<[4096, 128], bf16>, %cos: !irfuse.tensor<[3, s0, 64], bf16>, %sin: !irfuse.tensor<[3, s0, 64], bf16>) {
  // Qwen3-VL's: positions [3, T] (temporal, height, width), channels interleaved by section.
  // CHECK: attn.rope %{{.*}}, k %{{.*}}, positions %{{.*}}, cos_sin_cache %{{[^ ]+}} {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 24, 20, 20>, mrope_interleaved} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[3, s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, k_out !irfuse.tensor<[s0, 8, 128], bf16>)
  %qo, %ko = attn.rope %q, k %k, positions %pos, cos_sin_cache %cache {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 24, 20, 20>, mrope_interleaved} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[3, s0], i64>, !irfuse.tensor<[4096, 128], bf16>) -> (!irfuse.tensor<[s0, 32, 128], bf16>, k_out !irfuse.tensor<[s0, 8, 128], bf16>)
  // Qwen2-VL's on the tables at the three rows (vLLM's CUDA kernel takes them), one section after another.
  // CHECK-NEXT: attn.rope %{{.*}}, cos %{{.*}}, sin %{{[^ ]+}} {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 24>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[3, s0, 64], bf16>, !irfuse.tensor<[3, s0, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %qo2 = attn.rope %q, cos %cos, sin %sin {is_neox = true, rotary_dim = 128 : i64, head_dim = 128 : i64, mrope_section = array<i64: 16, 24, 24>} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[3, s0, 64], bf16>, !irfuse.tensor<[3, s0, 64], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  func.return
}

// CHECK-LABEL: func.func @kv_cache_write
func.func @kv_cache_write(%k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %kc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %vc: !irfuse.tensor<[1024, 16, 8, 128], bf16>, %slots: !irfuse.tensor<[s0], i64>) {
  // CHECK: %{{.*}}, %{{.*}} = attn.kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  %kc2, %vc2 = attn.kv_cache_write %k, %v, %kc, %vc, %slots : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[s0], i64>) -> (!irfuse.tensor<[1024, 16, 8, 128], bf16>, !irfuse.tensor<[1024, 16, 8, 128], bf16>)
  func.return
}

// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%q: !irfuse.tensor<[1, 4, s0, 16], f32>, %k: !irfuse.tensor<[1, 2, s0, 16], f32>, %v: !irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32> {
  // CHECK: %[[O:.+]] = attn.attention %{{.*}}, %{{.*}}, %{{[^ ]+}} {scale = 2.500000e-01 : f64, causal = true} : {{.*}} decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[A:[^:]+]]: {{.*}}, %[[B:[^:]+]]: {{.*}}, %[[C:[^:]+]]: {{.*}}):
  // CHECK-NEXT: %[[S:.+]] = aten.call "aten::scaled_dot_product_attention.default"(%[[A]], %[[B]], %[[C]], none, 0, true, enable_gqa = true)
  // CHECK-NEXT: irfuse.yield %[[S]]
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = true} : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[1, 4, s0, 16], f32>, %b: !irfuse.tensor<[1, 2, s0, 16], f32>, %c: !irfuse.tensor<[1, 2, s0, 16], f32>):
    %s = aten.call "aten::scaled_dot_product_attention.default"(%a, %b, %c, none, 0, true, enable_gqa = true) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
    irfuse.yield %s : !irfuse.tensor<[1, 4, s0, 16], f32>
  }
  func.return %o : !irfuse.tensor<[1, 4, s0, 16], f32>
}

// vLLM's attention calls: the cache lives in the forward context, found by the layer's name.
// CHECK-LABEL: func.func @vllm_attention
func.func @vllm_attention(%q: !irfuse.tensor<[s0, 32, 128], bf16>, %k: !irfuse.tensor<[s0, 8, 128], bf16>, %v: !irfuse.tensor<[s0, 8, 128], bf16>, %ln: !irfuse.opaque<"LayerName">, %mq: !irfuse.tensor<[s0, 16, 192], bf16>, %kvc: !irfuse.tensor<[s0, 512], bf16>, %kpe: !irfuse.tensor<[s0, 1, 64], bf16>, %ks: !irfuse.tensor<[], f32>) {
  // The cache write and its dummy, with the hoisted LayerName passed at run time.
  // CHECK: %[[DEP:.+]] = attn.vllm_kv_cache_update %{{.*}}, %{{.*}}, layer %{{[^ ]+}} {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  %dep = attn.vllm_kv_cache_update %k, %v, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  // CHECK-NEXT: attn.vllm_attention %{{.*}}, %{{.*}}, %{{.*}}, kv_cache_dep %[[DEP]], layer %{{[^ ]+}} {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %o = attn.vllm_attention %q, %k, %v, kv_cache_dep %dep, layer %ln {layer_name = "model.layers.0.self_attn.attn"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[0], bf16>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[s0, 32, 128], bf16>
  // The name as a string constant (no layer operand), no dependency, no cache write.
  // CHECK-NEXT: attn.vllm_attention %{{.*}}, %{{.*}}, %{{[^ ]+}} {layer_name = "l1"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %o2 = attn.vllm_attention %q, %k, %v {layer_name = "l1"} : (!irfuse.tensor<[s0, 32, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>, !irfuse.tensor<[s0, 8, 128], bf16>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  // MLA: the output is vLLM's flat buffer [T, H * v_head_dim].
  // CHECK-NEXT: attn.vllm_mla_attention %{{.*}}, %{{.*}}, %{{.*}}, kv_cache_dep %[[DEP]] {layer_name = "mla"} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s0, 2048], bf16>
  %om = attn.vllm_mla_attention %mq, %kvc, %kpe, kv_cache_dep %dep {layer_name = "mla"} : (!irfuse.tensor<[s0, 16, 192], bf16>, !irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[0], bf16>) -> !irfuse.tensor<[s0, 2048], bf16>
  // MLA's cache write: [kv_c | k_pe] into the latent cache, in the model dtype ("auto").
  // CHECK-NEXT: attn.vllm_mla_kv_cache_update %{{.*}}, %{{.*}}, %{{.*}}, layer %{{[^ ]+}} {layer_name = "model.layers.0.self_attn.attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[], f32>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  %mdep = attn.vllm_mla_kv_cache_update %kvc, %kpe, %ks, layer %ln {layer_name = "model.layers.0.self_attn.attn", kv_cache_dtype = "auto"} : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 1, 64], bf16>, !irfuse.tensor<[], f32>, !irfuse.opaque<"LayerName">) -> !irfuse.tensor<[0], bf16>
  func.return
}

// CHECK-LABEL: func.func @mla_kv_cache_write
func.func @mla_kv_cache_write(%kv_c: !irfuse.tensor<[s0, 512], bf16>, %k_pe: !irfuse.tensor<[s0, 64], bf16>, %cache: !irfuse.tensor<[1024, 16, 576], bf16>, %slots: !irfuse.tensor<[s0], i64>) {
  // CHECK: attn.mla_kv_cache_write %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]+}} : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1024, 16, 576], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[1024, 16, 576], bf16>
  %c2 = attn.mla_kv_cache_write %kv_c, %k_pe, %cache, %slots : (!irfuse.tensor<[s0, 512], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[1024, 16, 576], bf16>, !irfuse.tensor<[s0], i64>) -> !irfuse.tensor<[1024, 16, 576], bf16>
  func.return
}
