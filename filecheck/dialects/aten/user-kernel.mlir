// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s
// RUN: irfuse-opt %s -p raise-vllm-ops | filecheck %s

// A user Triton kernel's functionalized call (Dynamo's `triton_kernel_wrapper_functional`):
// dict arguments (`kwargs`, `tma_descriptor_metadata`), one result per key of the dict it
// returns (`dict [...]`), and the kernel's name as an attribute.
// CHECK-LABEL: func.func @mrope
func.func @mrope(%s0: !irfuse.sym<s0>, %q: !irfuse.tensor<[s0, 4096], bf16>, %k: !irfuse.tensor<[s0, 1024], bf16>, %cos: !irfuse.tensor<[3, s0, 64], bf16>, %sin: !irfuse.tensor<[3, s0, 64], bf16>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 1024], bf16>) {
  // CHECK: %{{.*}}, %{{.*}} = aten.call dict ["q_ptr", "k_ptr"] "hop:triton_kernel_wrapper_functional"(kernel_idx = 3, constant_args_idx = 7, grid = [(%{{.*}}, 1, 1)], tma_descriptor_metadata = {}, kwargs = {"q_ptr": %{{.*}}, "k_ptr": %{{.*}}, "cos": %{{.*}}, "sin": %{{.*}}, "num_tokens": %{{.*}}}, tensors_to_clone = ["q_ptr", "k_ptr"]) {kernel = "vllm.model_executor.layers.rotary_embedding.mrope._triton_mrope_forward"}
  %qr, %kr = aten.call dict ["q_ptr", "k_ptr"] "hop:triton_kernel_wrapper_functional"(kernel_idx = 3, constant_args_idx = 7, grid = [(%s0, 1, 1)], tma_descriptor_metadata = {}, kwargs = {"q_ptr": %q, "k_ptr": %k, "cos": %cos, "sin": %sin, "num_tokens": %s0}, tensors_to_clone = ["q_ptr", "k_ptr"]) {kernel = "vllm.model_executor.layers.rotary_embedding.mrope._triton_mrope_forward"} : (!irfuse.sym<s0>, !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 1024], bf16>, !irfuse.tensor<[3, s0, 64], bf16>, !irfuse.tensor<[3, s0, 64], bf16>, !irfuse.sym<s0>) -> (!irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 1024], bf16>)
  func.return %qr, %kr : !irfuse.tensor<[s0, 4096], bf16>, !irfuse.tensor<[s0, 1024], bf16>
}
// raise-vllm-ops leaves vLLM's CUDA MRoPE as it is (with a remark in the report:
// tests/raising/test_user_kernels.py).
