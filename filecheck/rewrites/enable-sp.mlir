// RUN: irfuse-opt %s --split-input-file -p enable-sp | filecheck %s
// RUN: irfuse-opt %s --split-input-file -p enable-sp,fuse-norm-quant | filecheck %s --check-prefix=FUSED

// Two decoder steps of a TP model on rank 1 of 2: the first all-reduce's norm adds the
// replicated embedding (rank 1's rows are sliced from it), the second norm takes the shard the
// first returned. Each all-reduce becomes a reduce-scatter of the tokens and each norm output an
// all-gather; the residual stays a shard between the norms.
// CHECK-LABEL: func.func @two_norms
// CHECK:       %[[S1:.+]] = coll.reduce_scatter %a1 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[B:.+]] = aten.call "aten::unflatten.int"(%emb, 0, [2, -1]) : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[2, 8, 64], bf16>
// CHECK:       %[[R1:.+]] = aten.call "aten::select.int"(%[[B]], 0, 1) : (!irfuse.tensor<[2, 8, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[Y1:.+]], %[[RO1:.+]] = norm.add_rms_norm %[[S1]], %[[R1]], weight %w1 {eps = 1.000000e-05 : f64} : (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>)
// CHECK:       %[[G1:.+]] = coll.all_gather %[[Y1]] {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
// CHECK:       %[[H:.+]] = gemm.matmul %[[G1]], %wd
// CHECK:       %[[S2:.+]] = coll.reduce_scatter %[[H]]
// CHECK:       %[[Y2:.+]], %{{.+}} = norm.add_rms_norm %[[S2]], %[[RO1]], weight %w2
// CHECK:       %[[G2:.+]] = coll.all_gather %[[Y2]]
// CHECK-NOT:   coll.all_reduce
// CHECK-NOT:   coll.all_gather
// CHECK:       func.return %[[G2]]
builtin.module attributes {irfuse.ranks = {"tp" = 1 : i64}} {
func.func @two_norms(%a1: !irfuse.tensor<[16, 64], bf16>, %emb: !irfuse.tensor<[16, 64], bf16>, %w1: !irfuse.tensor<[64], bf16>, %wd: !irfuse.tensor<[64, 64], bf16>, %w2: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[16, 64], bf16> {
  %r1 = coll.all_reduce %a1 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %y1, %ro1 = norm.add_rms_norm %r1, %emb, weight %w1 {eps = 1.0e-05 : f64} : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>)
  %h = gemm.matmul %y1, %wd : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %r2 = coll.all_reduce %h {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %y2, %ro2 = norm.add_rms_norm %r2, %ro1, weight %w2 {eps = 1.0e-05 : f64} : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>)
  func.return %y2 : !irfuse.tensor<[16, 64], bf16>
}
}

// -----
// vLLM's first norm: the all-reduced value is the norm's x and, later, the residual; a norm
// followed by one static FP8 quant quantizes its shard and gathers FP8. Symbolic tokens that TP 4
// divides (`4*s0`, no padding): the shard's rows are `(4*s0)//4`.
// CHECK-LABEL: func.func @first_norm_quant
// CHECK:       %[[S:.+]] = coll.reduce_scatter %x {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<["4*s0", 64], bf16>) -> !irfuse.tensor<["(4*s0)//4", 64], bf16>
// CHECK:       %[[Y:.+]] = norm.rms_norm %[[S]], weight %w
// CHECK:       %[[Q:.+]] = quant.fp8 %[[Y]], scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<["(4*s0)//4", 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<["(4*s0)//4", 64], f8E4M3FN>
// CHECK:       %[[G:.+]] = coll.all_gather %[[Q]] {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<["(4*s0)//4", 64], f8E4M3FN>) -> !irfuse.tensor<["4*s0", 64], f8E4M3FN>
// CHECK:       %[[Y2:.+]], %{{.+}} = norm.add_rms_norm %{{.+}}, %[[S]], weight %w
// CHECK:       func.return %[[G]], %{{.+}}
// FUSED-LABEL: func.func @first_norm_quant
// FUSED:       %[[Q:.+]] = fused.rms_norm_quant %{{.+}}, weight %w, scales [%s] {{.*}} -> (qs [!irfuse.tensor<["(4*s0)//4", 64], f8E4M3FN>])
// FUSED:       coll.all_gather %[[Q]]
func.func @first_norm_quant(%x: !irfuse.tensor<["4*s0", 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %s: !irfuse.tensor<[1], f32>, %x2: !irfuse.tensor<["4*s0", 64], bf16>) -> (!irfuse.tensor<["4*s0", 64], f8E4M3FN>, !irfuse.tensor<["4*s0", 64], bf16>) {
  %r = coll.all_reduce %x {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<["4*s0", 64], bf16>) -> !irfuse.tensor<["4*s0", 64], bf16>
  %y = norm.rms_norm %r, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<["4*s0", 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<["4*s0", 64], bf16>
  %q = quant.fp8 %y, scale %s {scheme = #quant.scheme<static_tensor>} : (!irfuse.tensor<["4*s0", 64], bf16>, !irfuse.tensor<[1], f32>) -> !irfuse.tensor<["4*s0", 64], f8E4M3FN>
  %r2 = coll.all_reduce %x2 {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<["4*s0", 64], bf16>) -> !irfuse.tensor<["4*s0", 64], bf16>
  %y2, %ro2 = norm.add_rms_norm %r2, %r, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<["4*s0", 64], bf16>, !irfuse.tensor<["4*s0", 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<["4*s0", 64], bf16>, !irfuse.tensor<["4*s0", 64], bf16>)
  func.return %q, %y2 : !irfuse.tensor<["4*s0", 64], f8E4M3FN>, !irfuse.tensor<["4*s0", 64], bf16>
}

// -----
// A new residual also returned: its full tensor is the all-gather of the shard. 15 tokens (TP 2
// does not divide them) are padded to 16 with a row of zeros and the gather sliced back to 15.
// Near misses stay: all-reduces (2-D and 3-D) that feed no norm.
// CHECK-LABEL: func.func @gathers_and_near_misses
// CHECK:       %[[Y:.+]], %[[RO:.+]] = norm.add_rms_norm %{{.+}}, %{{.+}}, weight %w {{.*}} -> (!irfuse.tensor<[8, 64], bf16>, !irfuse.tensor<[8, 64], bf16>)
// CHECK:       %[[GR:.+]] = coll.all_gather %[[RO]]
// CHECK:       %[[GY:.+]] = coll.all_gather %[[Y]]
// CHECK:       %[[P:.+]] = aten.call "aten::constant_pad_nd.default"(%odd, [0, 0, 0, 1], 0.0) : (!irfuse.tensor<[15, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
// CHECK:       %[[PS:.+]] = coll.reduce_scatter %[[P]] {{.*}} -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[PN:.+]] = norm.rms_norm %[[PS]]
// CHECK:       %[[PG:.+]] = coll.all_gather %[[PN]] {{.*}} -> !irfuse.tensor<[16, 64], bf16>
// CHECK:       %[[ON:.+]] = aten.call "aten::slice.Tensor"(%[[PG]], 0, 0, 15) : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[15, 64], bf16>
// CHECK:       coll.all_reduce %x
// CHECK:       coll.all_reduce %cube
// CHECK:       func.return %[[GY]], %[[GR]], %[[ON]]
builtin.module attributes {irfuse.ranks = {"tp" = 0 : i64}} {
func.func @gathers_and_near_misses(%a: !irfuse.tensor<[16, 64], bf16>, %res: !irfuse.tensor<[16, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %odd: !irfuse.tensor<[15, 64], bf16>, %x: !irfuse.tensor<[16, 64], bf16>, %cube: !irfuse.tensor<[2, 8, 64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[15, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[2, 8, 64], bf16>) {
  %r = coll.all_reduce %a {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %y, %ro = norm.add_rms_norm %r, %res, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>)
  %o = coll.all_reduce %odd {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[15, 64], bf16>) -> !irfuse.tensor<[15, 64], bf16>
  %on = norm.rms_norm %o, weight %w {eps = 1.0e-05 : f64} : (!irfuse.tensor<[15, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[15, 64], bf16>
  %p = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[16, 64], bf16>) -> !irfuse.tensor<[16, 64], bf16>
  %c = coll.all_reduce %cube {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[2, 8, 64], bf16>) -> !irfuse.tensor<[2, 8, 64], bf16>
  func.return %y, %ro, %on, %p, %c : !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[15, 64], bf16>, !irfuse.tensor<[16, 64], bf16>, !irfuse.tensor<[2, 8, 64], bf16>
}
}

// -----
// Hugging Face's hidden states `[B, S, H]` and its residual-first add (`residual + hidden`: the
// all-reduced value is the norm's residual operand), on rank 1 of 2. The collectives split the
// B*S rows of `reshape(-1, H)`; the norm runs on `[B*S/2, H]` with its operands in the model's
// order, and each gather is reshaped back to `[B, S, H]` (`-1` for the one symbolic dim).
// CHECK-LABEL: func.func @hf_rank3
// CHECK:       %[[F1:.+]] = aten.call "aten::reshape.default"(%a1, [-1, 64]) : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[S1:.+]] = coll.reduce_scatter %[[F1]] {{.*}} -> !irfuse.tensor<[4, 64], bf16>
// CHECK:       %[[FE:.+]] = aten.call "aten::reshape.default"(%emb, [-1, 64])
// CHECK:       %[[B:.+]] = aten.call "aten::unflatten.int"(%[[FE]], 0, [2, -1])
// CHECK:       %[[R1:.+]] = aten.call "aten::select.int"(%[[B]], 0, 1)
// CHECK:       %[[Y1:.+]], %[[RO1:.+]] = norm.add_rms_norm %[[R1]], %[[S1]], weight %w1 {{.*}} -> (!irfuse.tensor<[4, 64], bf16>, !irfuse.tensor<[4, 64], bf16>)
// CHECK:       %[[G1:.+]] = coll.all_gather %[[Y1]] {{.*}} -> !irfuse.tensor<[8, 64], bf16>
// CHECK:       %[[U1:.+]] = aten.call "aten::reshape.default"(%[[G1]], [1, 8, 64]) : (!irfuse.tensor<[8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
// CHECK:       %[[H:.+]] = aten.call "aten::mul.Tensor"(%[[U1]], 2.0)
// CHECK:       %[[F2:.+]] = aten.call "aten::reshape.default"(%[[H]], [-1, 64])
// CHECK:       %[[S2:.+]] = coll.reduce_scatter %[[F2]]
// CHECK:       %[[Y2:.+]], %{{.+}} = norm.add_rms_norm %[[RO1]], %[[S2]], weight %w2
// CHECK:       %[[G2:.+]] = coll.all_gather %[[Y2]]
// CHECK:       %[[U2:.+]] = aten.call "aten::reshape.default"(%[[G2]], [1, 8, 64])
// CHECK-NOT:   coll.all_reduce
// CHECK-NOT:   coll.all_gather
// CHECK:       func.return %[[U2]]
builtin.module attributes {irfuse.ranks = {"tp" = 1 : i64}} {
func.func @hf_rank3(%a1: !irfuse.tensor<[1, 8, 64], bf16>, %emb: !irfuse.tensor<[1, 8, 64], bf16>, %w1: !irfuse.tensor<[64], bf16>, %w2: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16> {
  %r1 = coll.all_reduce %a1 {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
  %y1, %ro1 = norm.add_rms_norm %emb, %r1, weight %w1 {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[1, 8, 64], bf16>)
  %h = aten.call "aten::mul.Tensor"(%y1, 2.0) : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
  %r2 = coll.all_reduce %h {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[1, 8, 64], bf16>) -> !irfuse.tensor<[1, 8, 64], bf16>
  %y2, %ro2 = norm.add_rms_norm %ro1, %r2, weight %w2 {eps = 1.0e-06 : f64, round_sum} : (!irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[1, 8, 64], bf16>, !irfuse.tensor<[1, 8, 64], bf16>)
  func.return %y2 : !irfuse.tensor<[1, 8, 64], bf16>
}
}

// -----
// A batch of symbolic length, `[2, s0, H]`: 2*s0 rows, `(2*s0)//2` a rank (TP 2 divides 2*s0:
// no padding). Rows of `[3, 5, H]` (15) are padded to 16 and sliced back.
// CHECK-LABEL: func.func @batch
// CHECK:       %[[F:.+]] = aten.call "aten::reshape.default"(%x, [-1, 64]) : (!irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<["2*s0", 64], bf16>
// CHECK:       %[[S:.+]] = coll.reduce_scatter %[[F]] {{.*}} -> !irfuse.tensor<["(2*s0)//2", 64], bf16>
// CHECK:       %[[Y:.+]] = norm.rms_norm %[[S]], weight %w {{.*}} -> !irfuse.tensor<["(2*s0)//2", 64], bf16>
// CHECK:       %[[G:.+]] = coll.all_gather %[[Y]] {{.*}} -> !irfuse.tensor<["2*s0", 64], bf16>
// CHECK:       %[[U:.+]] = aten.call "aten::reshape.default"(%[[G]], [2, -1, 64]) : (!irfuse.tensor<["2*s0", 64], bf16>) -> !irfuse.tensor<[2, s0, 64], bf16>
// CHECK:       %[[OF:.+]] = aten.call "aten::reshape.default"(%odd, [-1, 64]) : (!irfuse.tensor<[3, 5, 64], bf16>) -> !irfuse.tensor<[15, 64], bf16>
// CHECK:       aten.call "aten::constant_pad_nd.default"(%[[OF]], [0, 0, 0, 1], 0.0)
// CHECK:       %[[OS:.+]] = aten.call "aten::slice.Tensor"(%{{.+}}, 0, 0, 15)
// CHECK:       %[[OU:.+]] = aten.call "aten::reshape.default"(%[[OS]], [3, 5, 64])
// CHECK:       func.return %[[U]], %[[OU]]
func.func @batch(%x: !irfuse.tensor<[2, s0, 64], bf16>, %w: !irfuse.tensor<[64], bf16>, %odd: !irfuse.tensor<[3, 5, 64], bf16>) -> (!irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[3, 5, 64], bf16>) {
  %r = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[2, s0, 64], bf16>) -> !irfuse.tensor<[2, s0, 64], bf16>
  %y = norm.rms_norm %r, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[2, s0, 64], bf16>
  %o = coll.all_reduce %odd {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[3, 5, 64], bf16>) -> !irfuse.tensor<[3, 5, 64], bf16>
  %on = norm.rms_norm %o, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[3, 5, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[3, 5, 64], bf16>
  func.return %y, %on : !irfuse.tensor<[2, s0, 64], bf16>, !irfuse.tensor<[3, 5, 64], bf16>
}

// -----
// Two symbolic dims, `[s0, s1, H]`: s0*s1 rows, which TP 2 may not divide: padded by
// `(-(s0*s1)) % 2` rows; the gather is sliced back to s0*s1 rows and goes back through
// `reshape_as` (a reshape can infer one dim only).
// CHECK-LABEL: func.func @two_symbols
// CHECK:       %[[F:.+]] = aten.call "aten::reshape.default"(%x, [-1, 64]) : (!irfuse.tensor<[s0, s1, 64], bf16>) -> !irfuse.tensor<["s0*s1", 64], bf16>
// CHECK:       %[[N:.+]] = aten.call "aten::sym_size.int"(%[[F]], 0) : (!irfuse.tensor<["s0*s1", 64], bf16>) -> !irfuse.sym<"s0*s1">
// CHECK:       %[[P:.+]] = aten.call "aten::constant_pad_nd.default"(%[[F]], [0, 0, 0, %{{.+}}], 0.0)
// CHECK:       %[[S:.+]] = coll.reduce_scatter %[[P]] {{.*}} -> !irfuse.tensor<["(2*(((s0*s1) + 1)//2))//2", 64], bf16>
// CHECK:       %[[G:.+]] = coll.all_gather %{{.+}} {{.*}} -> !irfuse.tensor<["2*(((s0*s1) + 1)//2)", 64], bf16>
// CHECK:       %[[R:.+]] = aten.call "aten::slice.Tensor"(%[[G]], 0, 0, %[[N]]) : (!irfuse.tensor<["2*(((s0*s1) + 1)//2)", 64], bf16>, !irfuse.sym<"s0*s1">) -> !irfuse.tensor<["s0*s1", 64], bf16>
// CHECK:       %[[U:.+]] = aten.call "aten::reshape_as.default"(%[[R]], %x) : (!irfuse.tensor<["s0*s1", 64], bf16>, !irfuse.tensor<[s0, s1, 64], bf16>) -> !irfuse.tensor<[s0, s1, 64], bf16>
// CHECK:       func.return %[[U]]
func.func @two_symbols(%x: !irfuse.tensor<[s0, s1, 64], bf16>, %w: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, s1, 64], bf16> {
  %r = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, s1, 64], bf16>) -> !irfuse.tensor<[s0, s1, 64], bf16>
  %y = norm.rms_norm %r, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, s1, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, s1, 64], bf16>
  func.return %y : !irfuse.tensor<[s0, s1, 64], bf16>
}

// -----
// vLLM's first layer on a dynamic num_tokens `s0` (TP 2 may not divide it), its all-reduces
// spelled as vLLM's op: the first all-reduced value is the norm's input and the next norm's
// residual. Each all-reduce input is padded by `(-s0) % 2` rows of zeros (`sym_size` reads s0)
// before vLLM's own reduce-scatter; the residual stays a padded shard between the norms; each
// norm output is gathered with vLLM's all-gather and sliced back to s0 rows.
// CHECK-LABEL: func.func @dynamic_tokens
// CHECK:       %[[N:.+]] = aten.call "aten::sym_size.int"(%a1, 0) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.sym<s0>
// CHECK:       %[[NEG:.+]] = aten.call "py:operator.neg"(%[[N]])
// CHECK:       %[[AMT:.+]] = aten.call "py:operator.mod"(%[[NEG]], 2)
// CHECK:       %[[P1:.+]] = aten.call "aten::constant_pad_nd.default"(%a1, [0, 0, 0, %[[AMT]]], 0.0) : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.sym<"Mod(-(s0), 2)">) -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>
// CHECK:       %[[S1:.+]] = coll.reduce_scatter %[[P1]] {group = "tp:0", world_size = 2 : i64} : (!irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>) -> !irfuse.tensor<["(2*(((s0) + 1)//2))//2", 64], bf16> decomposition {
// CHECK:         aten.call "vllm::reduce_scatter.default"(%{{.+}}, 0, 2, "tp:0")
// CHECK:       %[[Y1:.+]] = norm.rms_norm %[[S1]], weight %w1
// CHECK:       %[[G1:.+]] = coll.all_gather %[[Y1]] {{.*}} -> !irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16> decomposition {
// CHECK:         aten.call "vllm::all_gather.default"(%{{.+}}, 0, 2, "tp:0")
// CHECK:       %[[U1:.+]] = aten.call "aten::slice.Tensor"(%[[G1]], 0, 0, %[[N]]) : (!irfuse.tensor<["2*(((s0) + 1)//2)", 64], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 64], bf16>
// CHECK:       %[[H:.+]] = aten.call "aten::mul.Tensor"(%[[U1]], 2.0)
// CHECK:       %[[P2:.+]] = aten.call "aten::constant_pad_nd.default"(%[[H]], [0, 0, 0, %{{.+}}], 0.0)
// CHECK:       %[[S2:.+]] = coll.reduce_scatter %[[P2]]
// CHECK:       %[[Y2:.+]], %{{.+}} = norm.add_rms_norm %[[S2]], %[[S1]], weight %w2
// CHECK:       %[[G2:.+]] = coll.all_gather %[[Y2]]
// CHECK:       %[[U2:.+]] = aten.call "aten::slice.Tensor"(%[[G2]], 0, 0, %{{.+}})
// CHECK-NOT:   coll.all_reduce
// CHECK:       func.return %[[U2]]
func.func @dynamic_tokens(%a1: !irfuse.tensor<[s0, 64], bf16>, %w1: !irfuse.tensor<[64], bf16>, %w2: !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> {
  %r1 = coll.all_reduce %a1 {group = "tp:0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  ^bb0(%i1: !irfuse.tensor<[s0, 64], bf16>):
    %v1 = aten.call "vllm::all_reduce.default"(%i1, "tp:0") : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %v1 : !irfuse.tensor<[s0, 64], bf16>
  }
  %y1 = norm.rms_norm %r1, weight %w1 {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %h = aten.call "aten::mul.Tensor"(%y1, 2.0) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %r2 = coll.all_reduce %h {group = "tp:0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  ^bb0(%i2: !irfuse.tensor<[s0, 64], bf16>):
    %v2 = aten.call "vllm::all_reduce.default"(%i2, "tp:0") : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %v2 : !irfuse.tensor<[s0, 64], bf16>
  }
  %y2, %ro2 = norm.add_rms_norm %r2, %r1, weight %w2 {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[64], bf16>) -> (!irfuse.tensor<[s0, 64], bf16>, !irfuse.tensor<[s0, 64], bf16>)
  func.return %y2 : !irfuse.tensor<[s0, 64], bf16>
}
