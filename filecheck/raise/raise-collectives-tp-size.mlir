// RUN: irfuse-opt %s -p 'raise-collectives{tp_size=4}' | filecheck %s

// vLLM's all_reduce on its TP group "tp:0" names no size and torch.distributed does not know
// vLLM's names: the TP size (pass option, recorded on the module) gives it. A DP group beside TP
// does not borrow the TP size: it stays an ATen call (a remark says why).
// CHECK: builtin.module attributes {irfuse.tp_size = 4 : i64}
// CHECK-LABEL: func.func @vllm_tp
// CHECK: %[[A:.+]] = coll.all_reduce %{{.+}} {group = "tp:0", world_size = 4 : i64}
// CHECK: "vllm::all_reduce.default"
// CHECK: irfuse.yield
// CHECK-NOT: coll.
// CHECK: aten.call "vllm::all_reduce.default"(%[[A]], group_name = "dp:0")
// CHECK: func.return
func.func @vllm_tp(%x: !irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16> {
  %a = aten.call "vllm::all_reduce.default"(%x, group_name = "tp:0") : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  %b = aten.call "vllm::all_reduce.default"(%a, group_name = "dp:0") : (!irfuse.tensor<[s0, 256], bf16>) -> !irfuse.tensor<[s0, 256], bf16>
  func.return %b : !irfuse.tensor<[s0, 256], bf16>
}
