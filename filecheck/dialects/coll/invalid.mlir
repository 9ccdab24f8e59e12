// RUN: irfuse-opt %s --verify-diagnostics --split-input-file | filecheck %s

func.func @world_size(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 0 : i64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  func.return
}
// CHECK: world_size must be >= 1, got 0

// -----

func.func @reduce_op(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64, reduce_op = "prod"} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  func.return
}
// CHECK: reduce_op must be one of sum, avg, max, min, got 'prod'

// -----

func.func @all_reduce_type(%x: !irfuse.tensor<[s0, 4096], bf16>) {
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], f32>
  func.return
}
// CHECK: y has dtype f32, expected x's bf16

// -----

func.func @scatter_divides(%x: !irfuse.tensor<[250, 4096], bf16>) {
  %a = coll.reduce_scatter %x {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[250, 4096], bf16>) -> !irfuse.tensor<[62, 4096], bf16>
  func.return
}
// CHECK: dim 0 of size 250 is not divisible by world_size 4

// -----

func.func @scatter_shape(%x: !irfuse.tensor<[256, 4096], bf16>) {
  %a = coll.reduce_scatter %x {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 1024], bf16>
  func.return
}
// CHECK: y has shape [256, 1024], expected [64, 4096]

// -----

func.func @scatter_dim(%x: !irfuse.tensor<[256, 4096], bf16>) {
  %a = coll.reduce_scatter %x {group = "tp", world_size = 4 : i64, dim = 2 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  func.return
}
// CHECK: dim 2 is out of range for rank 2

// -----

func.func @gather_shape(%x: !irfuse.tensor<[64, 4096], bf16>) {
  %a = coll.all_gather %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  func.return
}
// CHECK: y has shape [256, 4096], expected [128, 4096]

// -----

func.func @gather_world_size(%x: !irfuse.tensor<[64, 4096], bf16>) {
  %a = coll.all_gather %x {group = "tp", world_size = -2 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  func.return
}
// CHECK: world_size must be >= 1, got -2
