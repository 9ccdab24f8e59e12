// RUN: irfuse-opt %s -p cse-pure | filecheck %s

// Duplicates merge into the first, and the merge carries on down the chain: the second rsqrt
// reads the merged add, so it merges too; tuple calls merge result by result; factories merge on
// their arguments.
// CHECK-LABEL: func.func @merged
// CHECK-SAME:  (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], bf16>, %[[S:[^:]+]]: !irfuse.tensor<[], f32>)
// CHECK-NEXT:  %[[C:.+]] = aten.call "aten::_to_copy.default"(%[[X]], dtype = f32)
// CHECK-NEXT:  %[[P:.+]] = aten.call "aten::pow.Tensor_Scalar"(%[[C]], 2)
// CHECK-NEXT:  %[[M:.+]] = aten.call "aten::mean.dim"(%[[P]], [-1], true)
// CHECK-NEXT:  %[[E:.+]] = aten.call "aten::add.Tensor"(%[[M]], 1.0e-06)
// CHECK-NEXT:  %[[R:.+]] = aten.call "aten::rsqrt.default"(%[[E]])
// CHECK-NEXT:  %[[N:.+]] = aten.call "aten::mul.Tensor"(%[[C]], %[[R]])
// CHECK-NEXT:  %[[I:.+]] = aten.call "aten::reciprocal.default"(%[[S]])
// CHECK-NEXT:  %[[Q:.+]] = aten.call "aten::mul.Tensor"(%[[N]], %[[I]])
// CHECK-NEXT:  %[[Q2:.+]] = aten.call "aten::mul.Tensor"(%[[Q]], %[[I]])
// CHECK-NEXT:  %[[A:.+]], %[[B:.+]] = aten.call tuple "aten::split.Tensor"(%[[Q2]], 32, -1)
// CHECK-NEXT:  %[[AB:.+]] = aten.call "aten::add.Tensor"(%[[A]], %[[B]])
// CHECK-NEXT:  %[[F:.+]] = aten.call "aten::full.default"([], 0.5, dtype = f32, device = #aten.device<"cpu">, pin_memory = false)
// CHECK-NEXT:  %[[FF:.+]] = aten.call "aten::add.Tensor"(%[[F]], %[[F]])
// CHECK-NEXT:  %[[V:.+]] = aten.call "aten::view.default"(%[[AB]], [-1, 32])
// CHECK-NEXT:  %[[VV:.+]] = aten.call "aten::add.Tensor"(%[[V]], %[[V]])
// CHECK-NEXT:  %[[O:.+]] = aten.call "aten::mul.Tensor"(%[[VV]], %[[FF]])
// CHECK-NEXT:  func.return %[[O]]
func.func @merged(%x: !irfuse.tensor<[s0, 64], bf16>, %s: !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 32], f32> {
  %c1 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %p = aten.call "aten::pow.Tensor_Scalar"(%c1, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %m = aten.call "aten::mean.dim"(%p, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %e1 = aten.call "aten::add.Tensor"(%m, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %r1 = aten.call "aten::rsqrt.default"(%e1) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %c2 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], f32>
  %e2 = aten.call "aten::add.Tensor"(%m, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %r2 = aten.call "aten::rsqrt.default"(%e2) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  %n = aten.call "aten::mul.Tensor"(%c2, %r2) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %i1 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[], f32>) -> !irfuse.tensor<[], f32>
  %q1 = aten.call "aten::mul.Tensor"(%n, %i1) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %i2 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[], f32>) -> !irfuse.tensor<[], f32>
  %q2 = aten.call "aten::mul.Tensor"(%q1, %i2) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %a1, %b1 = aten.call tuple "aten::split.Tensor"(%q2, 32, -1) : (!irfuse.tensor<[s0, 64], f32>) -> (!irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 32], f32>)
  %a2, %b2 = aten.call tuple "aten::split.Tensor"(%q2, 32, -1) : (!irfuse.tensor<[s0, 64], f32>) -> (!irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 32], f32>)
  %ab = aten.call "aten::add.Tensor"(%a1, %b2) : (!irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 32], f32>) -> !irfuse.tensor<[s0, 32], f32>
  %f1 = aten.call "aten::full.default"([], 0.5, dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[], f32>
  %f2 = aten.call "aten::full.default"([], 0.5, dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[], f32>
  %ff = aten.call "aten::add.Tensor"(%f1, %f2) : (!irfuse.tensor<[], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[], f32>
  %v1 = aten.call "aten::view.default"(%ab, [-1, 32]) : (!irfuse.tensor<[s0, 32], f32>) -> !irfuse.tensor<[s0, 32], f32>
  %v2 = aten.call "aten::view.default"(%ab, [-1, 32]) : (!irfuse.tensor<[s0, 32], f32>) -> !irfuse.tensor<[s0, 32], f32>
  %vv = aten.call "aten::add.Tensor"(%v1, %v2) : (!irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[s0, 32], f32>) -> !irfuse.tensor<[s0, 32], f32>
  %o = aten.call "aten::mul.Tensor"(%vv, %ff) : (!irfuse.tensor<[s0, 32], f32>, !irfuse.tensor<[], f32>) -> !irfuse.tensor<[s0, 32], f32>
  func.return %o : !irfuse.tensor<[s0, 32], f32>
}

// Calls that look alike but are not one value stay: random ops, undefined contents, other
// templates (another scalar, -0.0 against 0.0, another dtype, another full value), other operands
// (or the same in another order), custom ops and collectives.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: "aten::rand_like.default"(%{{[^,]+}})
// CHECK-COUNT-2: "aten::bernoulli.p"(%{{[^,]+}}, 0.5)
// CHECK-COUNT-2: "aten::empty_like.default"(%{{[^,]+}})
// CHECK:       "aten::add.Tensor"(%[[X:[^,]+]], 1.0)
// CHECK-NEXT:  "aten::add.Tensor"(%[[X]], 2.0)
// CHECK-NEXT:  "aten::add.Tensor"(%[[X]], 0.0)
// CHECK-NEXT:  "aten::add.Tensor"(%[[X]], -0.0)
// CHECK-NEXT:  "aten::_to_copy.default"(%[[X]], dtype = f32)
// CHECK-NEXT:  "aten::_to_copy.default"(%[[X]], dtype = f16)
// CHECK-NEXT:  "aten::full.default"([], 0.5,
// CHECK-NEXT:  "aten::full.default"([], 0.25,
// CHECK-NEXT:  "aten::mul.Tensor"(%[[X]], %[[Y:[^)]+]])
// CHECK-NEXT:  "aten::mul.Tensor"(%[[Y]], %[[X]])
// CHECK-NEXT:  "aten::neg.default"(%[[X]])
// CHECK-NEXT:  "aten::neg.default"(%[[Y]])
// CHECK-COUNT-2: "_c10d_functional::all_reduce.default"(%[[X]], "sum", "0")
// CHECK-COUNT-2: "irfuse::silu_mul.default"(%[[X]])
func.func @kept(%x: !irfuse.tensor<[4, 8], f32>, %y: !irfuse.tensor<[4, 8], f32>) {
  %r1 = aten.call "aten::rand_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %r2 = aten.call "aten::rand_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %d1 = aten.call "aten::bernoulli.p"(%x, 0.5) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %d2 = aten.call "aten::bernoulli.p"(%x, 0.5) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %u1 = aten.call "aten::empty_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %u2 = aten.call "aten::empty_like.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %a1 = aten.call "aten::add.Tensor"(%x, 1.0) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %a2 = aten.call "aten::add.Tensor"(%x, 2.0) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %z1 = aten.call "aten::add.Tensor"(%x, 0.0) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %z2 = aten.call "aten::add.Tensor"(%x, -0.0) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %c1 = aten.call "aten::_to_copy.default"(%x, dtype = f32) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %c2 = aten.call "aten::_to_copy.default"(%x, dtype = f16) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f16>
  %f1 = aten.call "aten::full.default"([], 0.5, dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[], f32>
  %f2 = aten.call "aten::full.default"([], 0.25, dtype = f32, device = #aten.device<"cpu">, pin_memory = false) : () -> !irfuse.tensor<[], f32>
  %m1 = aten.call "aten::mul.Tensor"(%x, %y) : (!irfuse.tensor<[4, 8], f32>, !irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %m2 = aten.call "aten::mul.Tensor"(%y, %x) : (!irfuse.tensor<[4, 8], f32>, !irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %n1 = aten.call "aten::neg.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %n2 = aten.call "aten::neg.default"(%y) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %ar1 = aten.call "_c10d_functional::all_reduce.default"(%x, "sum", "0") : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %ar2 = aten.call "_c10d_functional::all_reduce.default"(%x, "sum", "0") : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 8], f32>
  %s1 = aten.call "irfuse::silu_mul.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 4], f32>
  %s2 = aten.call "irfuse::silu_mul.default"(%x) : (!irfuse.tensor<[4, 8], f32>) -> !irfuse.tensor<[4, 4], f32>
  func.return
}

// Writes: a read before a copy_ and the same read after it stay two (the copy_ may change the
// input); a view whose result is written in place keeps its own result; two reads after the
// write merge again. A duplicate the graph returns stays a separate output.
// CHECK-LABEL: func.func @writes
// CHECK-SAME:  (%[[S:[^:]+]]: !irfuse.tensor<[4], f32>, %[[T:[^:]+]]: !irfuse.tensor<[4], f32>)
// CHECK-NEXT:  %[[R1:.+]] = aten.call "aten::reciprocal.default"(%[[S]])
// CHECK-NEXT:  %[[V1:.+]] = aten.call "aten::view.default"(%[[T]], [2, 2])
// CHECK-NEXT:  %[[V2:.+]] = aten.call "aten::view.default"(%[[T]], [2, 2])
// CHECK-NEXT:  aten.call "aten::copy_.default"(%[[S]], %[[R1]])
// CHECK-NEXT:  %[[R2:.+]] = aten.call "aten::reciprocal.default"(%[[S]])
// CHECK-NEXT:  %[[W:.+]] = aten.call "aten::mul.Tensor"(%[[R2]], %[[R2]])
// CHECK-NEXT:  aten.call "aten::fill_.Scalar"(%[[V2]], 1.0)
// CHECK-NEXT:  %[[N1:.+]] = aten.call "aten::neg.default"(%[[W]])
// CHECK-NEXT:  %[[N2:.+]] = aten.call "aten::neg.default"(%[[W]])
// CHECK-NEXT:  func.return %[[R1]], %[[V1]], %[[N1]], %[[N2]]
func.func @writes(%s: !irfuse.tensor<[4], f32>, %t: !irfuse.tensor<[4], f32>) -> (!irfuse.tensor<[4], f32>, !irfuse.tensor<[2, 2], f32>, !irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>) {
  %r1 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %v1 = aten.call "aten::view.default"(%t, [2, 2]) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[2, 2], f32>
  %v2 = aten.call "aten::view.default"(%t, [2, 2]) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[2, 2], f32>
  %cp = aten.call "aten::copy_.default"(%s, %r1) : (!irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %r2 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %r3 = aten.call "aten::reciprocal.default"(%s) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %w = aten.call "aten::mul.Tensor"(%r2, %r3) : (!irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %fl = aten.call "aten::fill_.Scalar"(%v2, 1.0) : (!irfuse.tensor<[2, 2], f32>) -> !irfuse.tensor<[2, 2], f32>
  %n1 = aten.call "aten::neg.default"(%w) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  %n2 = aten.call "aten::neg.default"(%w) : (!irfuse.tensor<[4], f32>) -> !irfuse.tensor<[4], f32>
  func.return %r1, %v1, %n1, %n2 : !irfuse.tensor<[4], f32>, !irfuse.tensor<[2, 2], f32>, !irfuse.tensor<[4], f32>, !irfuse.tensor<[4], f32>
}

// Only ops of one block merge, the first staying: an op used before its duplicate's position is
// fine (the duplicate's uses move to it), but a top-level duplicate of an op inside a raised
// op's decomposition stays (the nested op does not dominate it and would have to move out).
// CHECK-LABEL: func.func @blocks
// CHECK-SAME:  (%[[X:[^:]+]]: !irfuse.tensor<[s0, 64], f32>, %[[W:[^:]+]]: !irfuse.tensor<[64], f32>)
// CHECK-NEXT:  %[[E1:.+]] = aten.call "aten::exp.default"(%[[X]])
// CHECK-NEXT:  %[[U:.+]] = aten.call "aten::neg.default"(%[[E1]])
// CHECK-NEXT:  %[[Y:.+]] = norm.rms_norm
// CHECK:       aten.call "aten::rsqrt.default"(%[[X]])
// CHECK:       irfuse.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[R:.+]] = aten.call "aten::rsqrt.default"(%[[X]])
// CHECK-NEXT:  %[[Z:.+]] = aten.call "aten::add.Tensor"(%[[E1]], %[[R]])
// CHECK-NEXT:  func.return %[[Y]], %[[Z]], %[[U]]
func.func @blocks(%x: !irfuse.tensor<[s0, 64], f32>, %w: !irfuse.tensor<[64], f32>) -> (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) {
  %e1 = aten.call "aten::exp.default"(%x) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %u = aten.call "aten::neg.default"(%e1) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %y = norm.rms_norm %x, weight %w {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], f32>, %b: !irfuse.tensor<[64], f32>):
    %p = aten.call "aten::pow.Tensor_Scalar"(%a, 2) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %m = aten.call "aten::mean.dim"(%p, [-1], true) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %e = aten.call "aten::add.Tensor"(%m, 1.0e-06) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %r = aten.call "aten::rsqrt.default"(%e) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
    %rx = aten.call "aten::rsqrt.default"(%x) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %n = aten.call "aten::mul.Tensor"(%a, %r) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %o = aten.call "aten::mul.Tensor"(%n, %b) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    irfuse.yield %o : !irfuse.tensor<[s0, 64], f32>
  }
  %rx2 = aten.call "aten::rsqrt.default"(%x) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %e2 = aten.call "aten::exp.default"(%x) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  %z = aten.call "aten::add.Tensor"(%e2, %rx2) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
  func.return %y, %z, %u : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>
}

// A gather by integer indices (`cache[positions]`, each layer's rope tables in vLLM) merges: its
// shape is its indices'. By a boolean mask it stays two (a data-dependent result shape), and
// a user Triton kernel's functional call between them writes nothing.
// CHECK-LABEL: func.func @gathers
// CHECK:       %[[G:.+]] = aten.call "aten::index.Tensor"(%{{.*}}, [%{{.*}}]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[3, s0], i64>)
// CHECK-NOT:   aten.call "aten::index.Tensor"({{.*}}i64>)
// CHECK:       aten.call "aten::index.Tensor"(%{{.*}}, [%{{.*}}]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[64], i1>)
// CHECK-NEXT:  aten.call "aten::index.Tensor"(%{{.*}}, [%{{.*}}]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[64], i1>)
// CHECK:       aten.call "aten::add.Tensor"(%[[G]], %[[G]])
func.func @gathers(%s0: !irfuse.sym<s0>, %cache: !irfuse.tensor<[64, 16], bf16>, %pos: !irfuse.tensor<[3, s0], i64>, %mask: !irfuse.tensor<[64], i1>, %q: !irfuse.tensor<[s0, 64], bf16>) -> (!irfuse.tensor<[3, s0, 16], bf16>, !irfuse.tensor<["u0", 16], bf16>, !irfuse.tensor<["u1", 16], bf16>, !irfuse.tensor<[s0, 64], bf16>) {
  %g1 = aten.call "aten::index.Tensor"(%cache, [%pos]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[3, s0], i64>) -> !irfuse.tensor<[3, s0, 16], bf16>
  %k = aten.call dict ["q_ptr"] "hop:triton_kernel_wrapper_functional"(kernel_idx = 0, constant_args_idx = 0, grid = [(%s0, 1, 1)], tma_descriptor_metadata = {}, kwargs = {"q_ptr": %q}, tensors_to_clone = ["q_ptr"]) : (!irfuse.sym<s0>, !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
  %g2 = aten.call "aten::index.Tensor"(%cache, [%pos]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[3, s0], i64>) -> !irfuse.tensor<[3, s0, 16], bf16>
  %b1 = aten.call "aten::index.Tensor"(%cache, [%mask]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[64], i1>) -> !irfuse.tensor<["u0", 16], bf16>
  %b2 = aten.call "aten::index.Tensor"(%cache, [%mask]) : (!irfuse.tensor<[64, 16], bf16>, !irfuse.tensor<[64], i1>) -> !irfuse.tensor<["u1", 16], bf16>
  %sum = aten.call "aten::add.Tensor"(%g1, %g2) : (!irfuse.tensor<[3, s0, 16], bf16>, !irfuse.tensor<[3, s0, 16], bf16>) -> !irfuse.tensor<[3, s0, 16], bf16>
  func.return %sum, %b1, %b2, %k : !irfuse.tensor<[3, s0, 16], bf16>, !irfuse.tensor<["u0", 16], bf16>, !irfuse.tensor<["u1", 16], bf16>, !irfuse.tensor<[s0, 64], bf16>
}
