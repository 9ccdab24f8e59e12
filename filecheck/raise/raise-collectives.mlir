// RUN: irfuse-opt %s -p raise-collectives | filecheck %s

// The module says the world size of group "0" (all_reduce's call does not) and of vLLM's "tp".
builtin.module attributes {irfuse.process_groups = {"0" = 2 : i64, "tp" = 4 : i64}} {

// funcol.all_reduce(x, "sum", group): the call and its wait become one op.
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 256], bf16>)
// CHECK: %[[Y:.+]] = coll.all_reduce %[[X]] {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16> decomposition {
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 256], bf16>):
// CHECK-NEXT: %[[R:.+]] = aten.call "_c10d_functional::all_reduce.default"(%[[A]], "sum", "0")
// CHECK-NEXT: %[[W:.+]] = aten.call "_c10d_functional::wait_tensor.default"(%[[R]])
// CHECK-NEXT: irfuse.yield %[[W]]
// CHECK: %[[Z:.+]] = aten.call "aten::mul.Tensor"(%[[Y]], 2)
// CHECK: func.return %[[Z]]
func.func @all_reduce(%x: !irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16> {
  %r = aten.call "_c10d_functional::all_reduce.default"(%x, "sum", "0") : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %w = aten.call "_c10d_functional::wait_tensor.default"(%r) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %z = aten.call "aten::mul.Tensor"(%w, 2) : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  func.return %z : !irfuse.tensor<[s0, 256], bf16>
}

// dist.all_reduce(x, op=MAX) in place, as functionalization leaves it: copy(x, waited) is x's
// new value and joins the region.
// CHECK-LABEL: func.func @all_reduce_inplace
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[s0, 256], f32>)
// CHECK: %[[Y:.+]] = coll.all_reduce %[[X]] {group = "0", world_size = 2 : i64, reduce_op = "max"}
// CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 256], f32>):
// CHECK-NEXT: %[[R:.+]] = aten.call "_c10d_functional::all_reduce.default"(%[[A]], "max", "0")
// CHECK-NEXT: %[[W:.+]] = aten.call "_c10d_functional::wait_tensor.default"(%[[R]])
// CHECK-NEXT: %[[C:.+]] = aten.call "aten::copy.default"(%[[A]], %[[W]])
// CHECK-NEXT: irfuse.yield %[[C]]
// CHECK: func.return %[[Y]]
func.func @all_reduce_inplace(%x: !irfuse.tensor<[s0, 256], f32>) -> !irfuse.tensor<[s0, 256], f32> {
  %r = aten.call "_c10d_functional::all_reduce.default"(%x, "max", "0") : (!irfuse.tensor<[s0, 256], f32>) -> !irfuse.tensor<[s0, 256], f32>
  %w = aten.call "_c10d_functional::wait_tensor.default"(%r) : (!irfuse.tensor<[s0, 256], f32>) -> !irfuse.tensor<[s0, 256], f32>
  %c = aten.call "aten::copy.default"(%x, %w) : (!irfuse.tensor<[s0, 256], f32>, !irfuse.tensor<[s0, 256], f32>) -> !irfuse.tensor<[s0, 256], f32>
  func.return %c : !irfuse.tensor<[s0, 256], f32>
}

// reduce_scatter then all_gather along dim 0 (sequence parallelism); world size from the calls.
// CHECK-LABEL: func.func @rs_ag
// CHECK-SAME: (%[[X:.+]]: !irfuse.tensor<[64, 256], bf16>)
// CHECK: %[[S:.+]] = coll.reduce_scatter %[[X]] {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[32, 256], bf16> decomposition {
// CHECK: "_c10d_functional::reduce_scatter_tensor.default"
// CHECK-NEXT: "_c10d_functional::wait_tensor.default"
// CHECK: %[[G:.+]] = coll.all_gather %[[S]] {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[32, 256], bf16>) -> !irfuse.tensor<[64, 256], bf16> decomposition {
// CHECK: "_c10d_functional::all_gather_into_tensor.default"
// CHECK-NEXT: "_c10d_functional::wait_tensor.default"
// CHECK: func.return %[[G]]
func.func @rs_ag(%x: !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[64, 256], bf16> {
  %rs = aten.call "_c10d_functional::reduce_scatter_tensor.default"(%x, "sum", 2, "0") : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[32, 256], bf16>
  %w0 = aten.call "_c10d_functional::wait_tensor.default"(%rs) : (!irfuse.tensor<[32, 256], bf16>) -> !irfuse.tensor<[32, 256], bf16>
  %ag = aten.call "_c10d_functional::all_gather_into_tensor.default"(%w0, 2, "0") : (!irfuse.tensor<[32, 256], bf16>) -> !irfuse.tensor<[64, 256], bf16>
  %w1 = aten.call "_c10d_functional::wait_tensor.default"(%ag) : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[64, 256], bf16>
  func.return %w1 : !irfuse.tensor<[64, 256], bf16>
}

// Along dim 1, as funcol writes it: the gather splits its rows back per rank (pieces of x's
// symbolic row count) and concatenates them on dim 1; the scatter splits x on dim 1 and
// concatenates the blocks on dim 0 before the dim-0 reduce-scatter.
// CHECK-LABEL: func.func @dim1
// CHECK-SAME: (%[[T:.+]]: !irfuse.sym<s0>, %[[X:.+]]: !irfuse.tensor<[s0, 6], f32>)
// CHECK: %[[G:.+]] = coll.all_gather %[[X]] {group = "0", world_size = 2 : i64, dim = 1 : i64} : (!irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<[s0, 12], f32> decomposition {
// CHECK: "_c10d_functional::all_gather_into_tensor.default"
// CHECK: "aten::split.Tensor"(%{{.+}}, %[[T]])
// CHECK: "aten::cat.default"([{{.+}}], 1)
// CHECK: %[[S:.+]] = coll.reduce_scatter %[[G]] {group = "0", world_size = 2 : i64, dim = 1 : i64} : (!irfuse.tensor<[s0, 12], f32>) -> !irfuse.tensor<[s0, 6], f32> decomposition {
// CHECK: "aten::split.Tensor"(%{{.+}}, 6, 1)
// CHECK: "aten::cat.default"
// CHECK: "_c10d_functional::reduce_scatter_tensor.default"
// CHECK: func.return %[[S]]
func.func @dim1(%t: !irfuse.sym<s0>, %x: !irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<[s0, 6], f32> {
  %ag = aten.call "_c10d_functional::all_gather_into_tensor.default"(%x, 2, "0") : (!irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<["2*s0", 6], f32>
  %w = aten.call "_c10d_functional::wait_tensor.default"(%ag) : (!irfuse.tensor<["2*s0", 6], f32>) -> !irfuse.tensor<["2*s0", 6], f32>
  %p0, %p1 = aten.call tuple "aten::split.Tensor"(%w, %t) : (!irfuse.tensor<["2*s0", 6], f32>, !irfuse.sym<s0>) -> (!irfuse.tensor<[s0, 6], f32>, !irfuse.tensor<[s0, 6], f32>)
  %g = aten.call "aten::cat.default"([%p0, %p1], 1) : (!irfuse.tensor<[s0, 6], f32>, !irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<[s0, 12], f32>
  %q0, %q1 = aten.call tuple "aten::split.Tensor"(%g, 6, 1) : (!irfuse.tensor<[s0, 12], f32>) -> (!irfuse.tensor<[s0, 6], f32>, !irfuse.tensor<[s0, 6], f32>)
  %c = aten.call "aten::cat.default"([%q0, %q1]) : (!irfuse.tensor<[s0, 6], f32>, !irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<["2*s0", 6], f32>
  %rs = aten.call "_c10d_functional::reduce_scatter_tensor.default"(%c, "sum", 2, "0") : (!irfuse.tensor<["2*s0", 6], f32>) -> !irfuse.tensor<[s0, 6], f32>
  %w2 = aten.call "_c10d_functional::wait_tensor.default"(%rs) : (!irfuse.tensor<[s0, 6], f32>) -> !irfuse.tensor<[s0, 6], f32>
  func.return %w2 : !irfuse.tensor<[s0, 6], f32>
}

// vLLM's ops (group_name passed by keyword, as vLLM calls them): no wait; the reduce-scatter
// and all-gather carry dim (-1, their default, is normalized) and world size.
// CHECK-LABEL: func.func @vllm
// CHECK: coll.all_reduce %{{.+}} {group = "tp", world_size = 4 : i64}
// CHECK: coll.reduce_scatter %{{.+}} {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16>
// CHECK: coll.all_gather %{{.+}} {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[16, 256], bf16>) -> !irfuse.tensor<[16, 1024], bf16>
func.func @vllm(%x: !irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 1024], bf16> {
  %a = aten.call "vllm::all_reduce.default"(%x, group_name = "tp") : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[64, 256], bf16>
  %s = aten.call "vllm::reduce_scatter.default"(%a, 0, 4, "tp") : (!irfuse.tensor<[64, 256], bf16>) -> !irfuse.tensor<[16, 256], bf16>
  %g = aten.call "vllm::all_gather.default"(%s, -1, 4, group_name = "tp") : (!irfuse.tensor<[16, 256], bf16>) -> !irfuse.tensor<[16, 1024], bf16>
  func.return %g : !irfuse.tensor<[16, 1024], bf16>
}

// FP8 gathered as bytes (gloo and older NCCL have no float8): `x.view(uint8)` (a detach between,
// as Dynamo leaves it) gathered and viewed back to FP8 is the all-gather of x; the views are in
// the region, so a GEMM reading the FP8 rows sees the gather.
// CHECK-LABEL: func.func @fp8_bytes
// CHECK:       %[[G:.+]] = coll.all_gather %q {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[16, 64], f8E4M3FN>) -> !irfuse.tensor<[64, 64], f8E4M3FN> decomposition {
// CHECK:         aten.call "aten::view.dtype"(%{{.+}}, ui8)
// CHECK:         aten.call "vllm::all_gather.default"
// CHECK:         aten.call "aten::view.dtype"(%{{.+}}, f8E4M3FN)
// CHECK:       func.return %[[G]]
func.func @fp8_bytes(%q: !irfuse.tensor<[16, 64], f8E4M3FN>) -> !irfuse.tensor<[64, 64], f8E4M3FN> {
  %b = aten.call "aten::view.dtype"(%q, ui8) : (!irfuse.tensor<[16, 64], f8E4M3FN>) -> !irfuse.tensor<[16, 64], ui8>
  %d = aten.call "aten::detach.default"(%b) : (!irfuse.tensor<[16, 64], ui8>) -> !irfuse.tensor<[16, 64], ui8>
  %g = aten.call "vllm::all_gather.default"(%d, 0, 4, "tp") : (!irfuse.tensor<[16, 64], ui8>) -> !irfuse.tensor<[64, 64], ui8>
  %f = aten.call "aten::view.dtype"(%g, f8E4M3FN) : (!irfuse.tensor<[64, 64], ui8>) -> !irfuse.tensor<[64, 64], f8E4M3FN>
  func.return %f : !irfuse.tensor<[64, 64], f8E4M3FN>
}

// Not raised: the collective's result read besides its wait; a product reduction; a group whose
// world size nothing says (no module entry, no other collective, no torch process group).
// CHECK-LABEL: func.func @negatives
// CHECK-NOT: coll.
// CHECK: func.return
func.func @negatives(%x: !irfuse.tensor<[8, 256], f32>) -> (!irfuse.tensor<[8, 256], f32>, !irfuse.tensor<[8, 256], f32>, !irfuse.tensor<[8, 256], f32>) {
  %r = aten.call "_c10d_functional::all_reduce.default"(%x, "sum", "0") : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %early = aten.call "aten::mul.Tensor"(%r, 2) : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %w = aten.call "_c10d_functional::wait_tensor.default"(%r) : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %p = aten.call "_c10d_functional::all_reduce.default"(%w, "product", "0") : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %pw = aten.call "_c10d_functional::wait_tensor.default"(%p) : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %u = aten.call "_c10d_functional::all_reduce.default"(%pw, "sum", "unknown") : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  %uw = aten.call "_c10d_functional::wait_tensor.default"(%u) : (!irfuse.tensor<[8, 256], f32>) -> !irfuse.tensor<[8, 256], f32>
  func.return %early, %pw, %uw : !irfuse.tensor<[8, 256], f32>, !irfuse.tensor<[8, 256], f32>, !irfuse.tensor<[8, 256], f32>
}

}
