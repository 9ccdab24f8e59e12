// RUN: irfuse-opt %s --verify-roundtrip | filecheck %s

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: !irfuse.tensor<[s0, 4096], bf16>, %t: !irfuse.tensor<[256, 4096], bf16>, %sh: !irfuse.tensor<[64, 4096], bf16>) {
  // The default reduce_op (sum) and dim (0) are not printed.
  // CHECK: coll.all_reduce %{{[^ ]+}} {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  %a = coll.all_reduce %x {group = "tp", world_size = 2 : i64, reduce_op = "sum"} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  // CHECK-NEXT: coll.all_reduce %{{[^ ]+}} {group = "tp:0,1", world_size = 2 : i64, reduce_op = "max"}
  %a2 = coll.all_reduce %x {group = "tp:0,1", world_size = 2 : i64, reduce_op = "max"} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s0, 4096], bf16>
  // CHECK-NEXT: coll.reduce_scatter %{{[^ ]+}} {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  %rs = coll.reduce_scatter %t {group = "tp", world_size = 4 : i64, dim = 0 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[64, 4096], bf16>
  // A negative dim, an avg reduction.
  // CHECK-NEXT: coll.reduce_scatter %{{[^ ]+}} {group = "tp", world_size = 4 : i64, dim = -1 : i64, reduce_op = "avg"} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 1024], bf16>
  %rs2 = coll.reduce_scatter %t {group = "tp", world_size = 4 : i64, dim = -1 : i64, reduce_op = "avg"} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 1024], bf16>
  // CHECK-NEXT: coll.reduce_scatter %{{[^ ]+}} {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 1024], bf16>
  %rs4 = coll.reduce_scatter %t {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[256, 4096], bf16>) -> !irfuse.tensor<[256, 1024], bf16>
  // A symbolic dim scatters into a symbol of its own.
  // CHECK-NEXT: coll.reduce_scatter %{{[^ ]+}} {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s1, 4096], bf16>
  %rs3 = coll.reduce_scatter %x {group = "tp", world_size = 2 : i64} : (!irfuse.tensor<[s0, 4096], bf16>) -> !irfuse.tensor<[s1, 4096], bf16>
  // CHECK-NEXT: coll.all_gather %{{[^ ]+}} {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  %ag = coll.all_gather %sh {group = "tp", world_size = 4 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[256, 4096], bf16>
  // CHECK-NEXT: coll.all_gather %{{[^ ]+}} {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[64, 16384], bf16>
  %ag2 = coll.all_gather %sh {group = "tp", world_size = 4 : i64, dim = 1 : i64} : (!irfuse.tensor<[64, 4096], bf16>) -> !irfuse.tensor<[64, 16384], bf16>
  func.return
}

// The functional collective and its wait, kept in the region.
// CHECK-LABEL: func.func @decomposed
func.func @decomposed(%x: !irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> {
  // CHECK: %[[Y:.+]] = coll.all_reduce %{{[^ ]+}} {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  // CHECK-NEXT: ^{{.*}}(%[[A:.+]]: !irfuse.tensor<[s0, 64], bf16>):
  // CHECK-NEXT: %[[R:.+]] = aten.call "_c10d_functional::all_reduce.default"(%[[A]], "sum", "0")
  // CHECK-NEXT: %[[W:.+]] = aten.call "_c10d_functional::wait_tensor.default"(%[[R]])
  // CHECK-NEXT: irfuse.yield %[[W]] : !irfuse.tensor<[s0, 64], bf16>
  %y = coll.all_reduce %x {group = "0", world_size = 2 : i64} : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16> decomposition {
  ^bb0(%a: !irfuse.tensor<[s0, 64], bf16>):
    %r = aten.call "_c10d_functional::all_reduce.default"(%a, "sum", "0") : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    %w = aten.call "_c10d_functional::wait_tensor.default"(%r) : (!irfuse.tensor<[s0, 64], bf16>) -> !irfuse.tensor<[s0, 64], bf16>
    irfuse.yield %w : !irfuse.tensor<[s0, 64], bf16>
  }
  func.return %y : !irfuse.tensor<[s0, 64], bf16>
}
