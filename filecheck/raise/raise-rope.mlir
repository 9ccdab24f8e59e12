// RUN: irfuse-opt %s -p raise-rope | filecheck %s

// vLLM's forward_native, NeoX: cos | sin = cache.index_select(0, positions).chunk(2), q and k
// rotated by the same lookup: one rope with positions and the cache, the lookup in the region.
// CHECK-LABEL: func.func @vllm_neox
// CHECK-SAME: (%[[CACHE:[^:]+]]: !irfuse.tensor<[64, 16], f32>, %{{[^:]+}}: !irfuse.sym<s11>, %[[POS:[^:]+]]: !irfuse.tensor<[s11], i64>, %[[Q:[^:]+]]: !irfuse.tensor<[s11, 4, 16], f32>, %[[K:[^:]+]]: !irfuse.tensor<[s11, 2, 16], f32>)
// CHECK-NEXT: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope %[[Q]], k %[[K]], positions %[[POS]], cos_sin_cache %[[CACHE]] {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK-NEXT: ^{{.*}}(%[[BQ:[^:]+]]: {{.*}}, %[[BK:[^:]+]]: {{.*}}, %[[BP:[^:]+]]: {{.*}}, %[[BC:[^:]+]]: {{.*}}):
// CHECK-NEXT: aten.call "aten::index_select.default"(%[[BC]], 0, %[[BP]])
// CHECK: aten.call "aten::alias.default"(%[[BQ]])
// CHECK: aten.call "aten::alias.default"(%[[BK]])
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[QO]], %[[KO]]
func.func @vllm_neox(%arg0: !irfuse.tensor<[64, 16], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.tensor<[s11, 4, 16], f32>, %arg4: !irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>) {
  %index_select = aten.call "aten::index_select.default"(%arg0, 0, %arg2) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%index_select, 8, -1) : (!irfuse.tensor<[s11, 16], f32>) -> (!irfuse.tensor<[s11, 8], f32>, !irfuse.tensor<[s11, 8], f32>)
  %alias = aten.call "aten::alias.default"(%arg3) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %split2, %split3 = aten.call tuple "aten::split.Tensor"(%alias, 8, -1) : (!irfuse.tensor<[s11, 4, 16], f32>) -> (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>)
  %mul = aten.call "aten::mul.Tensor"(%split2, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%split3, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%split3, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%split2, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %alias1 = aten.call "aten::alias.default"(%arg4) : (!irfuse.tensor<[s11, 2, 16], f32>) -> !irfuse.tensor<[s11, 2, 16], f32>
  %unsqueeze2 = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze3 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %split4, %split5 = aten.call tuple "aten::split.Tensor"(%alias1, 8, -1) : (!irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>)
  %mul4 = aten.call "aten::mul.Tensor"(%split4, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%split5, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %sub1 = aten.call "aten::sub.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%split5, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%split4, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%sub1, %add1], -1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 16], f32>
  func.return %cat, %cat1 : !irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>
}

// vLLM's GPT-J style on a partial rotary dim: x[..., :8] rotated by (even, odd) pairs, stacked and
// flattened, x[..., 8:] passed through by cat; the cache indexed by cache[positions].
// CHECK-LABEL: func.func @vllm_gptj_partial
// CHECK-SAME: (%[[CACHE:[^:]+]]: !irfuse.tensor<[64, 8], f32>, %{{[^:]+}}: !irfuse.sym<s11>, %[[POS:[^:]+]]: !irfuse.tensor<[s11], i64>, %[[Q:[^:]+]]: !irfuse.tensor<[s11, 4, 16], f32>, %[[K:[^:]+]]: !irfuse.tensor<[s11, 2, 16], f32>)
// CHECK-NEXT: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope %[[Q]], k %[[K]], positions %[[POS]], cos_sin_cache %[[CACHE]] {is_neox = false, rotary_dim = 8 : i64, head_dim = 16 : i64}
// CHECK: aten.call "aten::index.Tensor"
// CHECK: aten.call "aten::stack.default"
// CHECK: aten.call "aten::cat.default"
// CHECK: irfuse.yield
// CHECK: func.return %[[QO]], %[[KO]]
func.func @vllm_gptj_partial(%arg0: !irfuse.tensor<[64, 8], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.tensor<[s11, 4, 16], f32>, %arg4: !irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>) {
  %index = aten.call "aten::index.Tensor"(%arg0, [%arg2]) : (!irfuse.tensor<[64, 8], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 8], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%index, 4, -1) : (!irfuse.tensor<[s11, 8], f32>) -> (!irfuse.tensor<[s11, 4], f32>, !irfuse.tensor<[s11, 4], f32>)
  %slice = aten.call "aten::slice.Tensor"(%arg3, 2, 0, 8) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 4], f32>) -> !irfuse.tensor<[s11, 1, 4], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 4], f32>) -> !irfuse.tensor<[s11, 1, 4], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%slice, 2, 0, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%slice, 2, 1, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %mul = aten.call "aten::mul.Tensor"(%slice1, %unsqueeze) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%slice2, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 4, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%slice2, %unsqueeze) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%slice1, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 4, 4], f32>) -> !irfuse.tensor<[s11, 4, 4], f32>
  %stack = aten.call "aten::stack.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 4], f32>, !irfuse.tensor<[s11, 4, 4], f32>) -> !irfuse.tensor<[s11, 4, 4, 2], f32>
  %view = aten.call "aten::view.default"(%stack, [%arg1, 4, 8]) : (!irfuse.tensor<[s11, 4, 4, 2], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%arg3, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%view, %slice3], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %slice4 = aten.call "aten::slice.Tensor"(%arg4, 2, 0, 8) : (!irfuse.tensor<[s11, 2, 16], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %unsqueeze2 = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 4], f32>) -> !irfuse.tensor<[s11, 1, 4], f32>
  %unsqueeze3 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 4], f32>) -> !irfuse.tensor<[s11, 1, 4], f32>
  %slice5 = aten.call "aten::slice.Tensor"(%slice4, 2, 0, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %slice6 = aten.call "aten::slice.Tensor"(%slice4, 2, 1, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %mul4 = aten.call "aten::mul.Tensor"(%slice5, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%slice6, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %sub1 = aten.call "aten::sub.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 2, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%slice6, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%slice5, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 1, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 2, 4], f32>) -> !irfuse.tensor<[s11, 2, 4], f32>
  %stack1 = aten.call "aten::stack.default"([%sub1, %add1], -1) : (!irfuse.tensor<[s11, 2, 4], f32>, !irfuse.tensor<[s11, 2, 4], f32>) -> !irfuse.tensor<[s11, 2, 4, 2], f32>
  %view1 = aten.call "aten::view.default"(%stack1, [%arg1, 2, 8]) : (!irfuse.tensor<[s11, 2, 4, 2], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %slice7 = aten.call "aten::slice.Tensor"(%arg4, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s11, 2, 16], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%view1, %slice7], -1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 16], f32>
  func.return %cat, %cat1 : !irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>
}

// GPT-J pairs taken from a (d/2, 2) view: x.view(.., -1, 2)[..., 0] and [..., 1].
// CHECK-LABEL: func.func @gptj_view_pairs
// CHECK-SAME: (%[[CACHE:[^:]+]]: !irfuse.tensor<[64, 16], f32>, %{{[^:]+}}: !irfuse.sym<s11>, %[[POS:[^:]+]]: !irfuse.tensor<[s11], i64>, %{{[^:]+}}: !irfuse.sym<s11>, %[[Q:[^:]+]]: !irfuse.tensor<[s11, 4, 16], f32>, %[[K:[^:]+]]: !irfuse.tensor<[s11, 2, 16], f32>)
// CHECK: attn.rope %[[Q]], k %[[K]], positions %[[POS]], cos_sin_cache %[[CACHE]] {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK: aten.call "aten::select.int"
func.func @gptj_view_pairs(%arg0: !irfuse.tensor<[64, 16], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.sym<s11>, %arg4: !irfuse.tensor<[s11, 4, 16], f32>, %arg5: !irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>) {
  %index = aten.call "aten::index.Tensor"(%arg0, [%arg2]) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%index, 8, -1) : (!irfuse.tensor<[s11, 16], f32>) -> (!irfuse.tensor<[s11, 8], f32>, !irfuse.tensor<[s11, 8], f32>)
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %view = aten.call "aten::view.default"(%arg4, [%arg1, 4, -1, 2]) : (!irfuse.tensor<[s11, 4, 16], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 4, 8, 2], f32>
  %select = aten.call "aten::select.int"(%view, 3, 0) : (!irfuse.tensor<[s11, 4, 8, 2], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %select1 = aten.call "aten::select.int"(%view, 3, 1) : (!irfuse.tensor<[s11, 4, 8, 2], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul = aten.call "aten::mul.Tensor"(%select, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%select1, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%select1, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%select, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %stack = aten.call "aten::stack.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8, 2], f32>
  %view1 = aten.call "aten::view.default"(%stack, [%arg3, 4, 16]) : (!irfuse.tensor<[s11, 4, 8, 2], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %view2 = aten.call "aten::view.default"(%arg5, [%arg1, 2, -1, 2]) : (!irfuse.tensor<[s11, 2, 16], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 2, 8, 2], f32>
  %select2 = aten.call "aten::select.int"(%view2, 3, 0) : (!irfuse.tensor<[s11, 2, 8, 2], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %select3 = aten.call "aten::select.int"(%view2, 3, 1) : (!irfuse.tensor<[s11, 2, 8, 2], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul4 = aten.call "aten::mul.Tensor"(%select2, %unsqueeze) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%select3, %unsqueeze1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %sub1 = aten.call "aten::sub.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%select3, %unsqueeze) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%select2, %unsqueeze1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %stack1 = aten.call "aten::stack.default"([%sub1, %add1], -1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8, 2], f32>
  %view3 = aten.call "aten::view.default"(%stack1, [%arg3, 2, 16]) : (!irfuse.tensor<[s11, 2, 8, 2], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 2, 16], f32>
  func.return %view1, %view3 : !irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>
}

// Hugging Face's rotate_every_two through a (d/2, 2) view and unbind.
// CHECK-LABEL: func.func @gptj_view_unbind_hf
// CHECK: attn.rope %{{[^,]+}}, k %{{[^,]+}}, cos %{{[^,]+}}, sin %{{[^ ]+}} {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK: aten.call tuple "aten::unbind.int"
func.func @gptj_view_unbind_hf(%arg0: !irfuse.sym<s13>, %arg1: !irfuse.tensor<[s13, 16], f32>, %arg2: !irfuse.sym<s13>, %arg3: !irfuse.tensor<[s13, 16], f32>, %arg4: !irfuse.tensor<[s13, 4, 16], f32>, %arg5: !irfuse.tensor<[s13, 2, 16], f32>) -> (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>) {
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg1, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg3, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%arg4, %unsqueeze) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %view = aten.call "aten::view.default"(%arg4, [%arg2, 4, -1, 2]) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.sym<s13>) -> !irfuse.tensor<[s13, 4, 8, 2], f32>
  %unbind, %unbind1 = aten.call tuple "aten::unbind.int"(%view, -1) : (!irfuse.tensor<[s13, 4, 8, 2], f32>) -> (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>)
  %neg = aten.call "aten::neg.default"(%unbind1) : (!irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %stack = aten.call "aten::stack.default"([%neg, %unbind], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8, 2], f32>
  %view1 = aten.call "aten::view.default"(%stack, [%arg2, 4, 16]) : (!irfuse.tensor<[s13, 4, 8, 2], f32>, !irfuse.sym<s13>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%view1, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%arg5, %unsqueeze) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %view2 = aten.call "aten::view.default"(%arg5, [%arg2, 2, -1, 2]) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.sym<s13>) -> !irfuse.tensor<[s13, 2, 8, 2], f32>
  %unbind2, %unbind3 = aten.call tuple "aten::unbind.int"(%view2, -1) : (!irfuse.tensor<[s13, 2, 8, 2], f32>) -> (!irfuse.tensor<[s13, 2, 8], f32>, !irfuse.tensor<[s13, 2, 8], f32>)
  %neg1 = aten.call "aten::neg.default"(%unbind3) : (!irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %stack1 = aten.call "aten::stack.default"([%neg1, %unbind2], -1) : (!irfuse.tensor<[s13, 2, 8], f32>, !irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 8, 2], f32>
  %view3 = aten.call "aten::view.default"(%stack1, [%arg2, 2, 16]) : (!irfuse.tensor<[s13, 2, 8, 2], f32>, !irfuse.sym<s13>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%view3, %unsqueeze1) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  func.return %add, %add1 : !irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>
}

// Hugging Face's apply_rotary_pos_emb: q * cos + rotate_half(q) * sin with cos/sin [B, S, D]
// unsqueezed to [B, 1, S, D]: a rope taking cos and sin (as multiplied).
// CHECK-LABEL: func.func @hf_neox
// CHECK-SAME: (%{{[^:]+}}: !irfuse.sym<s0>, %[[COS:[^:]+]]: !irfuse.tensor<[1, s0, 16], f32>, %[[SIN:[^:]+]]: !irfuse.tensor<[1, s0, 16], f32>, %[[Q:[^:]+]]: !irfuse.tensor<[1, 4, s0, 16], f32>, %[[K:[^:]+]]: !irfuse.tensor<[1, 2, s0, 16], f32>)
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::unsqueeze.default"(%[[COS]], 1)
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::unsqueeze.default"(%[[SIN]], 1)
// CHECK-NEXT: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope %[[Q]], k %[[K]], cos %[[C]], sin %[[S]] {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> (!irfuse.tensor<[1, 4, s0, 16], f32>, k_out !irfuse.tensor<[1, 2, s0, 16], f32>) decomposition {
// CHECK: aten.call "aten::neg.default"
// CHECK: irfuse.yield
// CHECK: func.return %[[QO]], %[[KO]]
func.func @hf_neox(%arg0: !irfuse.sym<s0>, %arg1: !irfuse.tensor<[1, s0, 16], f32>, %arg2: !irfuse.tensor<[1, s0, 16], f32>, %arg3: !irfuse.tensor<[1, 4, s0, 16], f32>, %arg4: !irfuse.tensor<[1, 2, s0, 16], f32>) -> (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) {
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg1, 1) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg2, 1) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%arg3, %unsqueeze) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %slice = aten.call "aten::slice.Tensor"(%arg3, 3, 0, 8) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%arg3, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %neg = aten.call "aten::neg.default"(%slice1) : (!irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %cat = aten.call "aten::cat.default"([%neg, %slice], -1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%cat, %unsqueeze1) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%arg4, %unsqueeze) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%arg4, 3, 0, 8) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%arg4, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %neg1 = aten.call "aten::neg.default"(%slice3) : (!irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%neg1, %slice2], -1) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%cat1, %unsqueeze1) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  func.return %add, %add1 : !irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>
}

// GPT-J / Cohere in Hugging Face: rotate_every_two = stack(-x[..., 1::2], x[..., ::2], -1).flatten(-2),
// on the first 8 of 16 dims (partial rotary, the rest passed through).
// CHECK-LABEL: func.func @hf_gptj_partial
// CHECK: attn.rope %{{[^,]+}}, k %{{[^,]+}}, cos %{{[^,]+}}, sin %{{[^ ]+}} {is_neox = false, rotary_dim = 8 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>)
// CHECK: aten.call "aten::stack.default"
// CHECK: irfuse.yield
func.func @hf_gptj_partial(%arg0: !irfuse.sym<s0>, %arg1: !irfuse.tensor<[1, s0, 8], f32>, %arg2: !irfuse.tensor<[1, s0, 8], f32>, %arg3: !irfuse.tensor<[1, 4, s0, 16], f32>, %arg4: !irfuse.tensor<[1, 2, s0, 16], f32>) -> (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) {
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg1, 1) : (!irfuse.tensor<[1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg2, 1) : (!irfuse.tensor<[1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %slice = aten.call "aten::slice.Tensor"(%arg3, 3, 0, 8) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%arg3, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %mul = aten.call "aten::mul.Tensor"(%slice, %unsqueeze) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%slice, 3, 1, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 4], f32>
  %neg = aten.call "aten::neg.default"(%slice2) : (!irfuse.tensor<[1, 4, s0, 4], f32>) -> !irfuse.tensor<[1, 4, s0, 4], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%slice, 3, 0, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 4], f32>
  %stack = aten.call "aten::stack.default"([%neg, %slice3], -1) : (!irfuse.tensor<[1, 4, s0, 4], f32>, !irfuse.tensor<[1, 4, s0, 4], f32>) -> !irfuse.tensor<[1, 4, s0, 4, 2], f32>
  %view = aten.call "aten::view.default"(%stack, [1, 4, %arg0, 8]) : (!irfuse.tensor<[1, 4, s0, 4, 2], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%view, %unsqueeze1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %cat = aten.call "aten::cat.default"([%add, %slice1], -1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %slice4 = aten.call "aten::slice.Tensor"(%arg4, 3, 0, 8) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %slice5 = aten.call "aten::slice.Tensor"(%arg4, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%slice4, %unsqueeze) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %slice6 = aten.call "aten::slice.Tensor"(%slice4, 3, 1, 9223372036854775807, 2) : (!irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 4], f32>
  %neg1 = aten.call "aten::neg.default"(%slice6) : (!irfuse.tensor<[1, 2, s0, 4], f32>) -> !irfuse.tensor<[1, 2, s0, 4], f32>
  %slice7 = aten.call "aten::slice.Tensor"(%slice4, 3, 0, 9223372036854775807, 2) : (!irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 4], f32>
  %stack1 = aten.call "aten::stack.default"([%neg1, %slice7], -1) : (!irfuse.tensor<[1, 2, s0, 4], f32>, !irfuse.tensor<[1, 2, s0, 4], f32>) -> !irfuse.tensor<[1, 2, s0, 4, 2], f32>
  %view1 = aten.call "aten::view.default"(%stack1, [1, 2, %arg0, 8]) : (!irfuse.tensor<[1, 2, s0, 4, 2], f32>, !irfuse.sym<s0>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%view1, %unsqueeze1) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%add1, %slice5], -1) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  func.return %cat, %cat1 : !irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>
}

// Only q rotated (MLA's q_pe with its k_pe rotated elsewhere): a q-only rope.
// CHECK-LABEL: func.func @q_only
// CHECK-SAME: %[[Q:[^:]+]]: !irfuse.tensor<[s11, 4, 16], f32>)
// CHECK: %[[QO:.+]] = attn.rope %[[Q]], positions %{{[^,]+}}, cos_sin_cache %{{[^ ]+}} {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64} : ({{.*}}) -> !irfuse.tensor<[s11, 4, 16], f32> decomposition {
// CHECK: func.return %[[QO]]
func.func @q_only(%arg0: !irfuse.tensor<[64, 16], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32> {
  %index = aten.call "aten::index.Tensor"(%arg0, [%arg2]) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%index, 8, -1) : (!irfuse.tensor<[s11, 16], f32>) -> (!irfuse.tensor<[s11, 8], f32>, !irfuse.tensor<[s11, 8], f32>)
  %alias = aten.call "aten::alias.default"(%arg3) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %slice = aten.call "aten::slice.Tensor"(%alias, 2, 0, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%alias, 2, 1, 9223372036854775807, 2) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul = aten.call "aten::mul.Tensor"(%slice, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%slice1, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%slice1, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%slice, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %stack = aten.call "aten::stack.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8, 2], f32>
  %view = aten.call "aten::view.default"(%stack, [%arg1, 4, 16]) : (!irfuse.tensor<[s11, 4, 8, 2], f32>, !irfuse.sym<s11>) -> !irfuse.tensor<[s11, 4, 16], f32>
  func.return %view : !irfuse.tensor<[s11, 4, 16], f32>
}

// DeepSeek-V3 in Hugging Face: the even/odd pairs rotated and concatenated as halves, which is NeoX's
// rotation of x de-interleaved: x is de-interleaved outside (cat of the strided slices) and the
// rope reads its halves.
// CHECK-LABEL: func.func @deepseek_hf
// CHECK-SAME: %[[Q:[^:]+]]: !irfuse.tensor<[1, 4, s0, 16], f32>, %[[K:[^:]+]]: !irfuse.tensor<[1, 1, s0, 16], f32>)
// CHECK-DAG: %[[QE:.+]] = aten.call "aten::slice.Tensor"(%[[Q]], 3, 0, 9223372036854775807, 2)
// CHECK-DAG: %[[QD:.+]] = aten.call "aten::slice.Tensor"(%[[Q]], 3, 1, 9223372036854775807, 2)
// CHECK-DAG: %[[KE:.+]] = aten.call "aten::slice.Tensor"(%[[K]], 3, 0, 9223372036854775807, 2)
// CHECK-DAG: %[[KD:.+]] = aten.call "aten::slice.Tensor"(%[[K]], 3, 1, 9223372036854775807, 2)
// CHECK-DAG: %[[QI:.+]] = aten.call "aten::cat.default"([%[[QE]], %[[QD]]], -1)
// CHECK-DAG: %[[KI:.+]] = aten.call "aten::cat.default"([%[[KE]], %[[KD]]], -1)
// CHECK: attn.rope %[[QI]], k %[[KI]], cos %{{[^,]+}}, sin %{{[^ ]+}} {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK-NEXT: ^{{.*}}(%[[BQ:[^:]+]]: {{.*}}):
// CHECK-NEXT: aten.call "aten::slice.Tensor"(%[[BQ]], -1, 0, 8)
// CHECK-NEXT: aten.call "aten::slice.Tensor"(%[[BQ]], -1, 8, 16)
func.func @deepseek_hf(%arg0: !irfuse.sym<s0>, %arg1: !irfuse.tensor<[1, s0, 16], f32>, %arg2: !irfuse.tensor<[1, s0, 16], f32>, %arg3: !irfuse.tensor<[1, 4, s0, 16], f32>, %arg4: !irfuse.tensor<[1, 1, s0, 16], f32>) -> (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) {
  %slice = aten.call "aten::slice.Tensor"(%arg1, 2, 0, 8) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, s0, 8], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%slice, 1) : (!irfuse.tensor<[1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%arg2, 2, 0, 8) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, s0, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%slice1, 1) : (!irfuse.tensor<[1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%arg3, 3, 0, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%arg3, 3, 1, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice4 = aten.call "aten::slice.Tensor"(%arg4, 3, 0, 9223372036854775807, 2) : (!irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %slice5 = aten.call "aten::slice.Tensor"(%arg4, 3, 1, 9223372036854775807, 2) : (!irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %mul = aten.call "aten::mul.Tensor"(%slice2, %unsqueeze) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%slice3, %unsqueeze1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%slice3, %unsqueeze) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%slice2, %unsqueeze1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %cat = aten.call "aten::cat.default"([%sub, %add], -1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %mul4 = aten.call "aten::mul.Tensor"(%slice4, %unsqueeze) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%slice5, %unsqueeze1) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %sub1 = aten.call "aten::sub.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%slice5, %unsqueeze) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%slice4, %unsqueeze1) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%sub1, %add1], -1) : (!irfuse.tensor<[1, 1, s0, 8], f32>, !irfuse.tensor<[1, 1, s0, 8], f32>) -> !irfuse.tensor<[1, 1, s0, 16], f32>
  func.return %cat, %cat1 : !irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>
}

// Rotation in f32 on a bf16 q and k (q.float() ... .to(bf16)): the casts join the region, so q, k and
// the results keep the model dtype.
// CHECK-LABEL: func.func @f32_casts
// CHECK: attn.rope %{{[^,]+}}, k %{{[^,]+}}, cos %{{[^,]+}}, sin %{{[^ ]+}} {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s13, 4, 16], bf16>, !irfuse.tensor<[s13, 2, 16], bf16>, !irfuse.tensor<[s13, 1, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> (!irfuse.tensor<[s13, 4, 16], bf16>, k_out !irfuse.tensor<[s13, 2, 16], bf16>)
func.func @f32_casts(%arg0: !irfuse.sym<s13>, %arg1: !irfuse.tensor<[s13, 16], f32>, %arg2: !irfuse.tensor<[s13, 16], f32>, %arg3: !irfuse.tensor<[s13, 4, 16], bf16>, %arg4: !irfuse.tensor<[s13, 2, 16], bf16>) -> (!irfuse.tensor<[s13, 4, 16], bf16>, !irfuse.tensor<[s13, 2, 16], bf16>) {
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg1, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg2, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %cast = aten.call "aten::_to_copy.default"(%arg3, dtype = f32) : (!irfuse.tensor<[s13, 4, 16], bf16>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %cast1 = aten.call "aten::_to_copy.default"(%arg4, dtype = f32) : (!irfuse.tensor<[s13, 2, 16], bf16>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%cast, %unsqueeze) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %slice = aten.call "aten::slice.Tensor"(%cast, 2, 0, 8) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%cast, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %neg = aten.call "aten::neg.default"(%slice1) : (!irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%neg, %slice], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%cat, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %cast2 = aten.call "aten::_to_copy.default"(%add, dtype = bf16) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], bf16>
  %mul2 = aten.call "aten::mul.Tensor"(%cast1, %unsqueeze) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%cast1, 2, 0, 8) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%cast1, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %neg1 = aten.call "aten::neg.default"(%slice3) : (!irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%neg1, %slice2], -1) : (!irfuse.tensor<[s13, 2, 8], f32>, !irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%cat1, %unsqueeze1) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %cast3 = aten.call "aten::_to_copy.default"(%add1, dtype = bf16) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], bf16>
  func.return %cast2, %cast3 : !irfuse.tensor<[s13, 4, 16], bf16>, !irfuse.tensor<[s13, 2, 16], bf16>
}

// Meta's / DeepSeek-V2's complex RoPE: view_as_complex(x.float().view(.., d/2, 2)) * freqs_cis, back
// with view_as_real and flatten, .type_as(x): GPT-J's rotation. cos and sin are made as views of
// freqs_cis (its real and imaginary parts); the casts join the region.
// CHECK-LABEL: func.func @complex_rope
// CHECK-SAME: (%{{[^:]+}}: !irfuse.sym<s37>, %[[F:[^:]+]]: !irfuse.tensor<[s37, 8], complex<f32>>, %[[Q:[^:]+]]: !irfuse.tensor<[s37, 4, 16], bf16>, %{{[^:]+}}: !irfuse.sym<s37>, %[[K:[^:]+]]: !irfuse.tensor<[s37, 2, 16], bf16>)
// CHECK: %[[U:.+]] = aten.call "aten::unsqueeze.default"(%{{.+}}, 1)
// CHECK: %[[R:.+]] = aten.call "aten::view_as_real.default"(%[[U]])
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::select.int"(%[[R]], -1, 0)
// CHECK-NEXT: %[[S:.+]] = aten.call "aten::select.int"(%[[R]], -1, 1)
// CHECK: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope %[[Q]], k %[[K]], cos %[[C]], sin %[[S]] {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64} : (!irfuse.tensor<[s37, 4, 16], bf16>, !irfuse.tensor<[s37, 2, 16], bf16>, !irfuse.tensor<[s37, 1, 8], f32>, !irfuse.tensor<[s37, 1, 8], f32>) -> (!irfuse.tensor<[s37, 4, 16], bf16>, k_out !irfuse.tensor<[s37, 2, 16], bf16>)
// CHECK: aten.call "aten::view_as_complex.default"
// CHECK: irfuse.yield
// CHECK-NOT: aten::view_as_real
// CHECK: func.return %[[QO]], %[[KO]]
func.func @complex_rope(%arg0: !irfuse.sym<s37>, %arg1: !irfuse.tensor<[s37, 8], complex<f32>>, %arg2: !irfuse.tensor<[s37, 4, 16], bf16>, %arg3: !irfuse.sym<s37>, %arg4: !irfuse.tensor<[s37, 2, 16], bf16>) -> (!irfuse.tensor<[s37, 4, 16], bf16>, !irfuse.tensor<[s37, 2, 16], bf16>) {
  %cast = aten.call "aten::_to_copy.default"(%arg2, dtype = f32) : (!irfuse.tensor<[s37, 4, 16], bf16>) -> !irfuse.tensor<[s37, 4, 16], f32>
  %view = aten.call "aten::view.default"(%cast, [%arg3, 4, -1, 2]) : (!irfuse.tensor<[s37, 4, 16], f32>, !irfuse.sym<s37>) -> !irfuse.tensor<[s37, 4, 8, 2], f32>
  %view_as_complex = aten.call "aten::view_as_complex.default"(%view) : (!irfuse.tensor<[s37, 4, 8, 2], f32>) -> !irfuse.tensor<[s37, 4, 8], complex<f32>>
  %slice = aten.call "aten::slice.Tensor"(%arg1, 0, 0, 9223372036854775807) : (!irfuse.tensor<[s37, 8], complex<f32>>) -> !irfuse.tensor<[s37, 8], complex<f32>>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%slice, 1) : (!irfuse.tensor<[s37, 8], complex<f32>>) -> !irfuse.tensor<[s37, 1, 8], complex<f32>>
  %mul = aten.call "aten::mul.Tensor"(%view_as_complex, %unsqueeze) : (!irfuse.tensor<[s37, 4, 8], complex<f32>>, !irfuse.tensor<[s37, 1, 8], complex<f32>>) -> !irfuse.tensor<[s37, 4, 8], complex<f32>>
  %view_as_real = aten.call "aten::view_as_real.default"(%mul) : (!irfuse.tensor<[s37, 4, 8], complex<f32>>) -> !irfuse.tensor<[s37, 4, 8, 2], f32>
  %view1 = aten.call "aten::view.default"(%view_as_real, [%arg3, 4, 16]) : (!irfuse.tensor<[s37, 4, 8, 2], f32>, !irfuse.sym<s37>) -> !irfuse.tensor<[s37, 4, 16], f32>
  %cast1 = aten.call "aten::_to_copy.default"(%view1, dtype = bf16, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : (!irfuse.tensor<[s37, 4, 16], f32>) -> !irfuse.tensor<[s37, 4, 16], bf16>
  %cast2 = aten.call "aten::_to_copy.default"(%arg4, dtype = f32) : (!irfuse.tensor<[s37, 2, 16], bf16>) -> !irfuse.tensor<[s37, 2, 16], f32>
  %view2 = aten.call "aten::view.default"(%cast2, [%arg3, 2, -1, 2]) : (!irfuse.tensor<[s37, 2, 16], f32>, !irfuse.sym<s37>) -> !irfuse.tensor<[s37, 2, 8, 2], f32>
  %view_as_complex1 = aten.call "aten::view_as_complex.default"(%view2) : (!irfuse.tensor<[s37, 2, 8, 2], f32>) -> !irfuse.tensor<[s37, 2, 8], complex<f32>>
  %slice1 = aten.call "aten::slice.Tensor"(%arg1, 0, 0, 9223372036854775807) : (!irfuse.tensor<[s37, 8], complex<f32>>) -> !irfuse.tensor<[s37, 8], complex<f32>>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%slice1, 1) : (!irfuse.tensor<[s37, 8], complex<f32>>) -> !irfuse.tensor<[s37, 1, 8], complex<f32>>
  %mul1 = aten.call "aten::mul.Tensor"(%view_as_complex1, %unsqueeze1) : (!irfuse.tensor<[s37, 2, 8], complex<f32>>, !irfuse.tensor<[s37, 1, 8], complex<f32>>) -> !irfuse.tensor<[s37, 2, 8], complex<f32>>
  %view_as_real1 = aten.call "aten::view_as_real.default"(%mul1) : (!irfuse.tensor<[s37, 2, 8], complex<f32>>) -> !irfuse.tensor<[s37, 2, 8, 2], f32>
  %view3 = aten.call "aten::view.default"(%view_as_real1, [%arg3, 2, 16]) : (!irfuse.tensor<[s37, 2, 8, 2], f32>, !irfuse.sym<s37>) -> !irfuse.tensor<[s37, 2, 16], f32>
  %cast3 = aten.call "aten::_to_copy.default"(%view3, dtype = bf16, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : (!irfuse.tensor<[s37, 2, 16], f32>) -> !irfuse.tensor<[s37, 2, 16], bf16>
  func.return %cast1, %cast3 : !irfuse.tensor<[s37, 4, 16], bf16>, !irfuse.tensor<[s37, 2, 16], bf16>
}

// Two layers sharing cos and sin (HF computes them once): one rope per layer, q paired with its own
// layer's k (the second layer's q depends on the first layer's result).
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[V:.+]] = aten.call "aten::view.default"(%{{.*}}, [-1, 4, 16])
// CHECK: %[[V1:.+]] = aten.call "aten::view.default"(%{{.*}}, [-1, 2, 16])
// CHECK: attn.rope %[[V]], k %[[V1]],
// CHECK: %[[V2:.+]] = aten.call "aten::view.default"(%{{.*}}, [-1, 4, 16])
// CHECK: %[[V3:.+]] = aten.call "aten::view.default"(%{{.*}}, [-1, 2, 16])
// CHECK: attn.rope %[[V2]], k %[[V3]],
// CHECK-NOT: attn.rope
func.func @two_layers(%arg0: !irfuse.sym<s13>, %arg1: !irfuse.tensor<[s13, 64], f32>, %arg2: !irfuse.tensor<[64, 64], f32>, %arg3: !irfuse.tensor<[64, 32], f32>, %arg4: !irfuse.tensor<[s13, 16], f32>, %arg5: !irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 64], f32> {
  %mm = aten.call "aten::mm.default"(%arg1, %arg2) : (!irfuse.tensor<[s13, 64], f32>, !irfuse.tensor<[64, 64], f32>) -> !irfuse.tensor<[s13, 64], f32>
  %view = aten.call "aten::view.default"(%mm, [-1, 4, 16]) : (!irfuse.tensor<[s13, 64], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mm1 = aten.call "aten::mm.default"(%arg1, %arg3) : (!irfuse.tensor<[s13, 64], f32>, !irfuse.tensor<[64, 32], f32>) -> !irfuse.tensor<[s13, 32], f32>
  %view1 = aten.call "aten::view.default"(%mm1, [-1, 2, 16]) : (!irfuse.tensor<[s13, 32], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg4, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg5, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%view, %unsqueeze) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %slice = aten.call "aten::slice.Tensor"(%view, 2, 0, 8) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%view, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %neg = aten.call "aten::neg.default"(%slice1) : (!irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%neg, %slice], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%cat, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%view1, %unsqueeze) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%view1, 2, 0, 8) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%view1, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %neg1 = aten.call "aten::neg.default"(%slice3) : (!irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%neg1, %slice2], -1) : (!irfuse.tensor<[s13, 2, 8], f32>, !irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%cat1, %unsqueeze1) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %sum = aten.call "aten::sum.dim_IntList"(%add, [1]) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %sum1 = aten.call "aten::sum.dim_IntList"(%add1, [1]) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %add2 = aten.call "aten::add.Tensor"(%sum, %sum1) : (!irfuse.tensor<[s13, 16], f32>, !irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %repeat = aten.call "aten::repeat.default"(%add2, [1, 4]) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 64], f32>
  %mm2 = aten.call "aten::mm.default"(%repeat, %arg2) : (!irfuse.tensor<[s13, 64], f32>, !irfuse.tensor<[64, 64], f32>) -> !irfuse.tensor<[s13, 64], f32>
  %view2 = aten.call "aten::view.default"(%mm2, [-1, 4, 16]) : (!irfuse.tensor<[s13, 64], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mm3 = aten.call "aten::mm.default"(%repeat, %arg3) : (!irfuse.tensor<[s13, 64], f32>, !irfuse.tensor<[64, 32], f32>) -> !irfuse.tensor<[s13, 32], f32>
  %view3 = aten.call "aten::view.default"(%mm3, [-1, 2, 16]) : (!irfuse.tensor<[s13, 32], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %unsqueeze2 = aten.call "aten::unsqueeze.default"(%arg4, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %unsqueeze3 = aten.call "aten::unsqueeze.default"(%arg5, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %mul4 = aten.call "aten::mul.Tensor"(%view2, %unsqueeze2) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %slice4 = aten.call "aten::slice.Tensor"(%view2, 2, 0, 8) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %slice5 = aten.call "aten::slice.Tensor"(%view2, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %neg2 = aten.call "aten::neg.default"(%slice5) : (!irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %cat2 = aten.call "aten::cat.default"([%neg2, %slice4], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%cat2, %unsqueeze3) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %add3 = aten.call "aten::add.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%view3, %unsqueeze2) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %slice6 = aten.call "aten::slice.Tensor"(%view3, 2, 0, 8) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %slice7 = aten.call "aten::slice.Tensor"(%view3, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %neg3 = aten.call "aten::neg.default"(%slice7) : (!irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 8], f32>
  %cat3 = aten.call "aten::cat.default"([%neg3, %slice6], -1) : (!irfuse.tensor<[s13, 2, 8], f32>, !irfuse.tensor<[s13, 2, 8], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%cat3, %unsqueeze3) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %add4 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[s13, 2, 16], f32>, !irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 2, 16], f32>
  %sum2 = aten.call "aten::sum.dim_IntList"(%add3, [1]) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %sum3 = aten.call "aten::sum.dim_IntList"(%add4, [1]) : (!irfuse.tensor<[s13, 2, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %add5 = aten.call "aten::add.Tensor"(%sum2, %sum3) : (!irfuse.tensor<[s13, 16], f32>, !irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 16], f32>
  %repeat1 = aten.call "aten::repeat.default"(%add5, [1, 4]) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 64], f32>
  func.return %repeat1 : !irfuse.tensor<[s13, 64], f32>
}

// The rotated q is used (transposed) before k is rotated: the user moves after the rope.
// CHECK-LABEL: func.func @q_used_before_k
// CHECK: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::transpose.int"(%[[QO]], 1, 2)
// CHECK-NEXT: func.return %[[T]], %[[KO]]
func.func @q_used_before_k(%arg0: !irfuse.sym<s0>, %arg1: !irfuse.tensor<[1, s0, 16], f32>, %arg2: !irfuse.tensor<[1, s0, 16], f32>, %arg3: !irfuse.tensor<[1, 4, s0, 16], f32>, %arg4: !irfuse.tensor<[1, 2, s0, 16], f32>) -> (!irfuse.tensor<[1, s0, 4, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) {
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg1, 1) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg2, 1) : (!irfuse.tensor<[1, s0, 16], f32>) -> !irfuse.tensor<[1, 1, s0, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%arg3, %unsqueeze) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %slice = aten.call "aten::slice.Tensor"(%arg3, 3, 0, 8) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%arg3, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %neg = aten.call "aten::neg.default"(%slice1) : (!irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 8], f32>
  %cat = aten.call "aten::cat.default"([%neg, %slice], -1) : (!irfuse.tensor<[1, 4, s0, 8], f32>, !irfuse.tensor<[1, 4, s0, 8], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%cat, %unsqueeze1) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[1, 4, s0, 16], f32>, !irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, 4, s0, 16], f32>
  %qt = aten.call "aten::transpose.int"(%add, 1, 2) : (!irfuse.tensor<[1, 4, s0, 16], f32>) -> !irfuse.tensor<[1, s0, 4, 16], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%arg4, %unsqueeze) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %slice2 = aten.call "aten::slice.Tensor"(%arg4, 3, 0, 8) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %slice3 = aten.call "aten::slice.Tensor"(%arg4, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %neg1 = aten.call "aten::neg.default"(%slice3) : (!irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%neg1, %slice2], -1) : (!irfuse.tensor<[1, 2, s0, 8], f32>, !irfuse.tensor<[1, 2, s0, 8], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%cat1, %unsqueeze1) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 1, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[1, 2, s0, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>) -> !irfuse.tensor<[1, 2, s0, 16], f32>
  func.return %qt, %add1 : !irfuse.tensor<[1, s0, 4, 16], f32>, !irfuse.tensor<[1, 2, s0, 16], f32>
}

// The cache lookup is also used elsewhere: it stays outside, the rope takes cos and sin.
// CHECK-LABEL: func.func @shared_lookup
// CHECK: %[[L:.+]] = aten.call "aten::index_select.default"
// CHECK: attn.rope %{{[^,]+}}, k %{{[^,]+}}, cos %{{[^,]+}}, sin %{{[^ ]+}} {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK: func.return %{{[^,]+}}, %{{[^,]+}}, %[[L]]
func.func @shared_lookup(%arg0: !irfuse.tensor<[64, 16], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.tensor<[s11, 4, 16], f32>, %arg4: !irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>, !irfuse.tensor<[s11, 16], f32>) {
  %index_select = aten.call "aten::index_select.default"(%arg0, 0, %arg2) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%index_select, 8, -1) : (!irfuse.tensor<[s11, 16], f32>) -> (!irfuse.tensor<[s11, 8], f32>, !irfuse.tensor<[s11, 8], f32>)
  %alias = aten.call "aten::alias.default"(%arg3) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %split2, %split3 = aten.call tuple "aten::split.Tensor"(%alias, 8, -1) : (!irfuse.tensor<[s11, 4, 16], f32>) -> (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>)
  %mul = aten.call "aten::mul.Tensor"(%split2, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%split3, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%split3, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%split2, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %alias1 = aten.call "aten::alias.default"(%arg4) : (!irfuse.tensor<[s11, 2, 16], f32>) -> !irfuse.tensor<[s11, 2, 16], f32>
  %unsqueeze2 = aten.call "aten::unsqueeze.default"(%split, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze3 = aten.call "aten::unsqueeze.default"(%split1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %split4, %split5 = aten.call tuple "aten::split.Tensor"(%alias1, 8, -1) : (!irfuse.tensor<[s11, 2, 16], f32>) -> (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>)
  %mul4 = aten.call "aten::mul.Tensor"(%split4, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul5 = aten.call "aten::mul.Tensor"(%split5, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %sub1 = aten.call "aten::sub.Tensor"(%mul4, %mul5) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul6 = aten.call "aten::mul.Tensor"(%split5, %unsqueeze2) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %mul7 = aten.call "aten::mul.Tensor"(%split4, %unsqueeze3) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul6, %mul7) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 8], f32>
  %cat1 = aten.call "aten::cat.default"([%sub1, %add1], -1) : (!irfuse.tensor<[s11, 2, 8], f32>, !irfuse.tensor<[s11, 2, 8], f32>) -> !irfuse.tensor<[s11, 2, 16], f32>
  func.return %cat, %cat1, %index_select : !irfuse.tensor<[s11, 4, 16], f32>, !irfuse.tensor<[s11, 2, 16], f32>, !irfuse.tensor<[s11, 16], f32>
}

// Negative: cos from cache[positions], sin from cache[other positions].
// CHECK-LABEL: func.func @different_positions
// CHECK-NOT: attn.rope
// CHECK: func.return
func.func @different_positions(%arg0: !irfuse.tensor<[64, 16], f32>, %arg1: !irfuse.sym<s11>, %arg2: !irfuse.tensor<[s11], i64>, %arg3: !irfuse.tensor<[s11], i64>, %arg4: !irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32> {
  %index = aten.call "aten::index.Tensor"(%arg0, [%arg2]) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %slice = aten.call "aten::slice.Tensor"(%index, 1, 0, 8) : (!irfuse.tensor<[s11, 16], f32>) -> !irfuse.tensor<[s11, 8], f32>
  %index1 = aten.call "aten::index.Tensor"(%arg0, [%arg3]) : (!irfuse.tensor<[64, 16], f32>, !irfuse.tensor<[s11], i64>) -> !irfuse.tensor<[s11, 16], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%index1, 1, 8, 9223372036854775807) : (!irfuse.tensor<[s11, 16], f32>) -> !irfuse.tensor<[s11, 8], f32>
  %alias = aten.call "aten::alias.default"(%arg4) : (!irfuse.tensor<[s11, 4, 16], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%slice, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%slice1, -2) : (!irfuse.tensor<[s11, 8], f32>) -> !irfuse.tensor<[s11, 1, 8], f32>
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%alias, 8, -1) : (!irfuse.tensor<[s11, 4, 16], f32>) -> (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>)
  %mul = aten.call "aten::mul.Tensor"(%split, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%split1, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %sub = aten.call "aten::sub.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%split1, %unsqueeze) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%split, %unsqueeze1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 1, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%sub, %add], -1) : (!irfuse.tensor<[s11, 4, 8], f32>, !irfuse.tensor<[s11, 4, 8], f32>) -> !irfuse.tensor<[s11, 4, 16], f32>
  func.return %cat : !irfuse.tensor<[s11, 4, 16], f32>
}

// Negative: rotate_half written cat(x2, -x1) (the rotation by -theta).
// CHECK-LABEL: func.func @wrong_sign
// CHECK-NOT: attn.rope
// CHECK: func.return
func.func @wrong_sign(%arg0: !irfuse.sym<s13>, %arg1: !irfuse.tensor<[s13, 4, 16], f32>, %arg2: !irfuse.tensor<[s13, 16], f32>, %arg3: !irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32> {
  %slice = aten.call "aten::slice.Tensor"(%arg1, 2, 0, 8) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %slice1 = aten.call "aten::slice.Tensor"(%arg1, 2, 8, 9223372036854775807) : (!irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg2, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg3, -2) : (!irfuse.tensor<[s13, 16], f32>) -> !irfuse.tensor<[s13, 1, 16], f32>
  %mul = aten.call "aten::mul.Tensor"(%arg1, %unsqueeze) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %neg = aten.call "aten::neg.default"(%slice) : (!irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%slice1, %neg], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%cat, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 1, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s13, 4, 16], f32>, !irfuse.tensor<[s13, 4, 16], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  func.return %add : !irfuse.tensor<[s13, 4, 16], f32>
}

// Negative: o1 = x1 * cos + x2 * sin.
// CHECK-LABEL: func.func @wrong_sign_pairs
// CHECK-NOT: attn.rope
// CHECK: func.return
func.func @wrong_sign_pairs(%arg0: !irfuse.sym<s13>, %arg1: !irfuse.tensor<[s13, 4, 16], f32>, %arg2: !irfuse.tensor<[s13, 8], f32>, %arg3: !irfuse.tensor<[s13, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32> {
  %split, %split1 = aten.call tuple "aten::split.Tensor"(%arg1, 8, -1) : (!irfuse.tensor<[s13, 4, 16], f32>) -> (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>)
  %unsqueeze = aten.call "aten::unsqueeze.default"(%arg2, -2) : (!irfuse.tensor<[s13, 8], f32>) -> !irfuse.tensor<[s13, 1, 8], f32>
  %unsqueeze1 = aten.call "aten::unsqueeze.default"(%arg3, -2) : (!irfuse.tensor<[s13, 8], f32>) -> !irfuse.tensor<[s13, 1, 8], f32>
  %mul = aten.call "aten::mul.Tensor"(%split, %unsqueeze) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 1, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %mul1 = aten.call "aten::mul.Tensor"(%split1, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 1, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %add = aten.call "aten::add.Tensor"(%mul, %mul1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %mul2 = aten.call "aten::mul.Tensor"(%split1, %unsqueeze) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 1, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %mul3 = aten.call "aten::mul.Tensor"(%split, %unsqueeze1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 1, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %add1 = aten.call "aten::add.Tensor"(%mul2, %mul3) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 8], f32>
  %cat = aten.call "aten::cat.default"([%add, %add1], -1) : (!irfuse.tensor<[s13, 4, 8], f32>, !irfuse.tensor<[s13, 4, 8], f32>) -> !irfuse.tensor<[s13, 4, 16], f32>
  func.return %cat : !irfuse.tensor<[s13, 4, 16], f32>
}

// OLMo / OLMo2 in Hugging Face: bf16 q and k times f32 cos / sin (the cos and sin of the rotary
// embedding are not cast to the model dtype), so the products promote to f32, and the sum is
// cast back by `.to(q_type)`. The same exact widening as x.float(): one rope, x bf16, cos/sin
// f32, the cast back in the region. Trimmed from a real dump.
// CHECK-LABEL: func.func @hf_promoted_by_f32_cos
// CHECK-SAME: (%[[Q:[^:]+]]: !irfuse.tensor<[1, 4, s27, 16], bf16>, %[[K:[^:]+]]: !irfuse.tensor<[1, 2, s27, 16], bf16>, %[[COS:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], f32>, %[[SIN:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], f32>)
// CHECK-NEXT: %[[QO:[^,]+]], %[[KO:[^ ]+]] = attn.rope %[[Q]], k %[[K]], cos %[[COS]], sin %[[SIN]] {is_neox = true, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK: aten.call "aten::_to_copy.default"({{.*}}dtype = bf16)
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[QO]], %[[KO]]
func.func @hf_promoted_by_f32_cos(%q: !irfuse.tensor<[1, 4, s27, 16], bf16>, %k: !irfuse.tensor<[1, 2, s27, 16], bf16>, %cos: !irfuse.tensor<[1, 1, s27, 16], f32>, %sin: !irfuse.tensor<[1, 1, s27, 16], f32>) -> (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 2, s27, 16], bf16>) {
  %mul_3 = aten.call "aten::mul.Tensor"(%q, %cos) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %slice_5 = aten.call "aten::slice.Tensor"(%q, 3, 0, 8) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %slice_6 = aten.call "aten::slice.Tensor"(%q, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %neg = aten.call "aten::neg.default"(%slice_6) : (!irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %cat_2 = aten.call "aten::cat.default"([%neg, %slice_5], -1) : (!irfuse.tensor<[1, 4, s27, 8], bf16>, !irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %mul_4 = aten.call "aten::mul.Tensor"(%cat_2, %sin) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %add_4 = aten.call "aten::add.Tensor"(%mul_3, %mul_4) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %mul_5 = aten.call "aten::mul.Tensor"(%k, %cos) : (!irfuse.tensor<[1, 2, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 2, s27, 16], f32>
  %slice_7 = aten.call "aten::slice.Tensor"(%k, 3, 0, 8) : (!irfuse.tensor<[1, 2, s27, 16], bf16>) -> !irfuse.tensor<[1, 2, s27, 8], bf16>
  %slice_8 = aten.call "aten::slice.Tensor"(%k, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 2, s27, 16], bf16>) -> !irfuse.tensor<[1, 2, s27, 8], bf16>
  %neg_1 = aten.call "aten::neg.default"(%slice_8) : (!irfuse.tensor<[1, 2, s27, 8], bf16>) -> !irfuse.tensor<[1, 2, s27, 8], bf16>
  %cat_3 = aten.call "aten::cat.default"([%neg_1, %slice_7], -1) : (!irfuse.tensor<[1, 2, s27, 8], bf16>, !irfuse.tensor<[1, 2, s27, 8], bf16>) -> !irfuse.tensor<[1, 2, s27, 16], bf16>
  %mul_6 = aten.call "aten::mul.Tensor"(%cat_3, %sin) : (!irfuse.tensor<[1, 2, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 2, s27, 16], f32>
  %add_5 = aten.call "aten::add.Tensor"(%mul_5, %mul_6) : (!irfuse.tensor<[1, 2, s27, 16], f32>, !irfuse.tensor<[1, 2, s27, 16], f32>) -> !irfuse.tensor<[1, 2, s27, 16], f32>
  %_to_copy_4 = aten.call "aten::_to_copy.default"(%add_4, dtype = bf16) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %_to_copy_5 = aten.call "aten::_to_copy.default"(%add_5, dtype = bf16) : (!irfuse.tensor<[1, 2, s27, 16], f32>) -> !irfuse.tensor<[1, 2, s27, 16], bf16>
  func.return %_to_copy_4, %_to_copy_5 : !irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 2, s27, 16], bf16>
}

// Ernie 4.5 in Hugging Face: GPT-J's rotate_half in bf16, then `q.float() * cos +
// rotate_half(q).float() * sin` and the cast back: the two widening casts join the region.
// CHECK-LABEL: func.func @hf_widened_gptj
// CHECK-SAME: (%{{[^:]+}}: !irfuse.sym<s27>, %[[Q:[^:]+]]: !irfuse.tensor<[1, 4, s27, 16], bf16>, %[[COS:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], f32>, %[[SIN:[^:]+]]: !irfuse.tensor<[1, 1, s27, 16], f32>)
// CHECK-NEXT: %[[QO:[^ ]+]] = attn.rope %[[Q]], cos %[[COS]], sin %[[SIN]] {is_neox = false, rotary_dim = 16 : i64, head_dim = 16 : i64}
// CHECK: aten.call "aten::_to_copy.default"({{.*}}dtype = f32)
// CHECK: aten.call "aten::stack.default"
// CHECK: aten.call "aten::_to_copy.default"({{.*}}dtype = f32)
// CHECK: aten.call "aten::_to_copy.default"({{.*}}dtype = bf16)
// CHECK: irfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[QO]]
func.func @hf_widened_gptj(%s: !irfuse.sym<s27>, %q: !irfuse.tensor<[1, 4, s27, 16], bf16>, %cos: !irfuse.tensor<[1, 1, s27, 16], f32>, %sin: !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16> {
  %_to_copy_4 = aten.call "aten::_to_copy.default"(%q, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %mul_5 = aten.call "aten::mul.Tensor"(%_to_copy_4, %cos) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %slice_7 = aten.call "aten::slice.Tensor"(%q, 3, 0, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %slice_8 = aten.call "aten::slice.Tensor"(%q, 3, 1, 9223372036854775807, 2) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %neg = aten.call "aten::neg.default"(%slice_8) : (!irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %stack = aten.call "aten::stack.default"([%neg, %slice_7], -1) : (!irfuse.tensor<[1, 4, s27, 8], bf16>, !irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 8, 2], bf16>
  %view_8 = aten.call "aten::view.default"(%stack, [1, 4, %s, 16]) : (!irfuse.tensor<[1, 4, s27, 8, 2], bf16>, !irfuse.sym<s27>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %_to_copy_5 = aten.call "aten::_to_copy.default"(%view_8, dtype = f32) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %mul_6 = aten.call "aten::mul.Tensor"(%_to_copy_5, %sin) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %add_5 = aten.call "aten::add.Tensor"(%mul_5, %mul_6) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %_to_copy_8 = aten.call "aten::_to_copy.default"(%add_5, dtype = bf16) : (!irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  func.return %_to_copy_8 : !irfuse.tensor<[1, 4, s27, 16], bf16>
}

// Computed in f32 (promoted by f32 cos/sin) but returned in f32, not cast back to q's dtype:
// the result is not q's type, so no rope.
// CHECK-LABEL: func.func @promoted_not_cast_back
// CHECK-NOT: attn.rope
// CHECK: func.return
func.func @promoted_not_cast_back(%q: !irfuse.tensor<[1, 4, s27, 16], bf16>, %cos: !irfuse.tensor<[1, 1, s27, 16], f32>, %sin: !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32> {
  %mul_3 = aten.call "aten::mul.Tensor"(%q, %cos) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %slice_5 = aten.call "aten::slice.Tensor"(%q, 3, 0, 8) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %slice_6 = aten.call "aten::slice.Tensor"(%q, 3, 8, 9223372036854775807) : (!irfuse.tensor<[1, 4, s27, 16], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %neg = aten.call "aten::neg.default"(%slice_6) : (!irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 8], bf16>
  %cat_2 = aten.call "aten::cat.default"([%neg, %slice_5], -1) : (!irfuse.tensor<[1, 4, s27, 8], bf16>, !irfuse.tensor<[1, 4, s27, 8], bf16>) -> !irfuse.tensor<[1, 4, s27, 16], bf16>
  %mul_4 = aten.call "aten::mul.Tensor"(%cat_2, %sin) : (!irfuse.tensor<[1, 4, s27, 16], bf16>, !irfuse.tensor<[1, 1, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  %add_4 = aten.call "aten::add.Tensor"(%mul_3, %mul_4) : (!irfuse.tensor<[1, 4, s27, 16], f32>, !irfuse.tensor<[1, 4, s27, 16], f32>) -> !irfuse.tensor<[1, 4, s27, 16], f32>
  func.return %add_4 : !irfuse.tensor<[1, 4, s27, 16], f32>
}
