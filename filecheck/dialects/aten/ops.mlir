// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s
// RUN: irfuse-opt %s --print-debuginfo --verify-roundtrip | filecheck %s --check-prefix=LOC

// Every argument kind of an imported call survives print -> parse -> print.
// CHECK-LABEL: func.func @args
func.func @args(%s0: !irfuse.sym<s0>, %x: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>) -> !irfuse.tensor<[s0, 4096], f32> {
  // CHECK: %[[V:.+]] = aten.call "aten::view.default"(%{{.*}}, [%{{.*}}, 32, 128]) : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  %v = aten.call "aten::view.default"(%x, [%s0, 32, 128]) : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.sym<s0>) -> !irfuse.tensor<[s0, 32, 128], bf16>
  // CHECK: aten.call "aten::_to_copy.default"(%{{.*}}, dtype = f32, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">)
  %f = aten.call "aten::_to_copy.default"(%x, dtype = f32, layout = #aten.layout<"torch.strided">, device = #aten.device<"cpu">) : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], f32>
  // CHECK: aten.call "aten::mean.dim"(%{{.*}}, [-1], true)
  %m = aten.call "aten::mean.dim"(%f, [-1], true) : (!irfuse.tensor<[s0, 4096], f32>) -> !irfuse.tensor<[s0, 1], f32>
  // CHECK: aten.call "aten::add.Scalar"(%{{.*}}, 9.999999974752427e-07)
  %a = aten.call "aten::add.Scalar"(%m, 9.999999974752427e-07) : (!irfuse.tensor<[s0, 1], f32>) -> !irfuse.tensor<[s0, 1], f32>
  // CHECK: aten.call "aten::clamp.default"(%{{.*}}, ninf, inf)
  %c = aten.call "aten::clamp.default"(%f, ninf, inf) : (!irfuse.tensor<[s0, 4096], f32>) -> !irfuse.tensor<[s0, 4096], f32>
  // CHECK: %{{.*}}, %{{.*}} = aten.call tuple "aten::split.Tensor"(%{{.*}}, 2048, -1)
  %p0, %p1 = aten.call tuple "aten::split.Tensor"(%c, 2048, -1) : (!irfuse.tensor<[s0, 4096], f32>) -> (!irfuse.tensor<[s0, 2048], f32>, !irfuse.tensor<[s0, 2048], f32>)
  // CHECK: aten.call "aten::full.default"([1], 0.5, dtype = f32, layout = none, pin_memory = false)
  %z = aten.call "aten::full.default"([1], 0.5, dtype = f32, layout = none, pin_memory = false) : () -> !irfuse.tensor<[1], f32>
  // CHECK: aten.call "py:operator.mul"(%{{.*}}, 4096) : (!irfuse.sym<s0>) -> !irfuse.sym<"4096*s0">
  %n = aten.call "py:operator.mul"(%s0, 4096) : (!irfuse.sym<s0>) -> !irfuse.sym<"4096*s0">
  // CHECK: aten.call "hop:auto_functionalized"(#aten.target<"irfuse::rms_norm.default">, x = %{{.*}}, tup = (1,))
  %h = aten.call "hop:auto_functionalized"(#aten.target<"irfuse::rms_norm.default">, x = %x, tup = (1,)) : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.opaque<"tuple">
  // CHECK: aten.get_attr "_tensor_constant0" : !irfuse.tensor<[], f32>
  %k = aten.get_attr "_tensor_constant0" : !irfuse.tensor<[], f32>
  // A 0-d constant carries the number it holds.
  // CHECK: aten.get_attr "_tensor_constant1" {value = 5.000000e-01 : f64} : !irfuse.tensor<[], f32>
  %k1 = aten.get_attr "_tensor_constant1" {value = 5.000000e-01 : f64} : !irfuse.tensor<[], f32>
  func.return %f : !irfuse.tensor<[s0, 4096], f32>
}

// The irfuse types: dims and sizes as symbols or quoted expressions, a SymBool, an opaque value.
// CHECK-LABEL: func.func @irfuse_types
// CHECK-SAME: (%{{.*}}: !irfuse.tensor<["2*s0", 128], f8E4M3FN>, %{{.*}}: !irfuse.sym<"2*s0">, %{{.*}}: !irfuse.sym<"Eq(s0, 1)", bool>, %{{.*}}: !irfuse.opaque<"list">)
func.func @irfuse_types(%t: !irfuse.tensor<["2*s0", 128], f8E4M3FN>, %n: !irfuse.sym<"2*s0">, %b: !irfuse.sym<"Eq(s0, 1)", bool>, %l: !irfuse.opaque<"list">) {
  func.return
}

// irfuse.yield ends a raised op's decomposition region with what the op returns, here two values.
// CHECK-LABEL: func.func @yield
func.func @yield(%x: !irfuse.tensor<[s0, 64], f32>, %res: !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32> {
  // CHECK: norm.add_rms_norm {{.*}} decomposition {
  // CHECK: %[[S:.+]] = aten.call "aten::add.Tensor"
  // CHECK-NEXT: %[[N:.+]] = aten.call "aten::rms_norm.default"(%[[S]], [64], none, 1.0e-06)
  // CHECK-NEXT: irfuse.yield %[[N]], %[[S]] : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>
  %y, %r = norm.add_rms_norm %x, %res {eps = 1.0e-06 : f64} : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], f32>, %b: !irfuse.tensor<[s0, 64], f32>):
    %s = aten.call "aten::add.Tensor"(%a, %b) : (!irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    %n = aten.call "aten::rms_norm.default"(%s, [64], none, 1.0e-06) : (!irfuse.tensor<[s0, 64], f32>) -> !irfuse.tensor<[s0, 64], f32>
    irfuse.yield %n, %s : !irfuse.tensor<[s0, 64], f32>, !irfuse.tensor<[s0, 64], f32>
  }
  func.return %y : !irfuse.tensor<[s0, 64], f32>
}

// A kernel call: an irfuse custom op, the implementation that runs it, its arguments as written.
// CHECK-LABEL: func.func @kernel_call
func.func @kernel_call(%x: !irfuse.tensor<[s0, 4096], bf16>, %res: !irfuse.tensor<[s0, 4096], bf16>, %w: !irfuse.tensor<[4096], bf16>, %s: !irfuse.tensor<[], f32>) {
  // CHECK: %{{.*}}, %{{.*}} = kernel.call impl "triton" tuple "irfuse::add_rms_norm_quant_fp8_static.default"(%{{.*}}, %{{.*}}, %{{.*}}, [%{{.*}}], 1.0e-06, 0.0, f8E4M3FN) : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  %q, %r = kernel.call impl "triton" tuple "irfuse::add_rms_norm_quant_fp8_static.default"(%x, %res, %w, [%s], 1.0e-06, 0.0, f8E4M3FN) : (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[4096], bf16>, !irfuse.tensor<[], f32>) -> (!irfuse.tensor<[s0, 4096], f8E4M3FN>, !irfuse.tensor<[s0, 4096], bf16>)
  func.return
}

// LOC: aten.call "aten::mul.Tensor"(%{{.*}}, 2.0) : {{.*}} loc("mul_3"("model.py":12:0))
func.func @loc(%x: !irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32> {
  %y = aten.call "aten::mul.Tensor"(%x, 2.0) : (!irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32> loc("mul_3"("model.py":12:0))
  func.return %y : !irfuse.tensor<[8], f32>
}
