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
  func.return %f : !irfuse.tensor<[s0, 4096], f32>
}

// LOC: aten.call "aten::mul.Tensor"(%{{.*}}, 2.0) : {{.*}} loc("mul_3"("model.py":12:0))
func.func @loc(%x: !irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32> {
  %y = aten.call "aten::mul.Tensor"(%x, 2.0) : (!irfuse.tensor<[8], f32>) -> !irfuse.tensor<[8], f32> loc("mul_3"("model.py":12:0))
  func.return %y : !irfuse.tensor<[8], f32>
}
