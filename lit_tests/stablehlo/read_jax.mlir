// RUN: hlopass-opt %s | filecheck %s
// What `jax.jit(f).lower(x, y).as_text(debug_info=True)` gives for
// f = lambda x, y: jnp.sin(x) * y (locations trimmed to the names): the instructions are
// named after the name locations, as in jax's `as_text(dialect="hlo")`.

module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> loc("x"), %arg1: tensor<3xf32> loc("y")) -> (tensor<2x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.sine %arg0 : tensor<2x3xf32> loc(#loc1)
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32> loc(#loc2)
    %2 = stablehlo.multiply %0, %1 : tensor<2x3xf32> loc(#loc3)
    return %2 : tensor<2x3xf32>
  }
}
#loc1 = loc("sin")
#loc2 = loc("broadcast_in_dim")
#loc3 = loc("mul")

// CHECK:      HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, f32[3]{0})->f32[2,3]{1,0}}
// CHECK-EMPTY:
// CHECK-NEXT: ENTRY %main.1 (x.1: f32[2,3], y.1: f32[3]) -> f32[2,3] {
// CHECK-NEXT:   %x.1 = f32[2,3]{1,0} parameter(0)
// CHECK-NEXT:   %sin.1 = f32[2,3]{1,0} sine(%x.1)
// CHECK-NEXT:   %y.1 = f32[3]{0} parameter(1)
// CHECK-NEXT:   %broadcast_in_dim.1 = f32[2,3]{1,0} broadcast(%y.1), dimensions={1}
// CHECK-NEXT:   ROOT %mul.1 = f32[2,3]{1,0} multiply(%sin.1, %broadcast_in_dim.1)
// CHECK-NEXT: }
