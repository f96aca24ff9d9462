// RUN: hlopass-opt %s --emit stablehlo | filecheck %s --check-prefix=MLIR
// RUN: hlopass-opt %s --emit stablehlo | hlopass-opt - | filecheck %s
// A reduction (its region becomes a computation) and a call (a function) through
// `--emit stablehlo` and back: the names stay, a function's name grows no suffix.

module @jit_g {
  func.func public @main(%arg0: tensor<4x8xf32> loc("x")) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc(#loc1)
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32> loc(#loc2)
    %1 = call @relu(%0) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc3)
    return %1 : tensor<4xf32>
  }
  func.func private @relu(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc(#loc1)
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32> loc(#loc4)
    %1 = stablehlo.maximum %arg0, %0 : tensor<4xf32> loc(#loc4)
    return %1 : tensor<4xf32>
  }
}
#loc1 = loc("zero")
#loc2 = loc("reduce_sum")
#loc3 = loc("jit_relu_")
#loc4 = loc("max")

// MLIR:     module @jit_g
// MLIR-NOT: @relu.
// MLIR:     func.func private @relu(
// MLIR:     stablehlo.maximum
// MLIR:     func.func @main(
// MLIR:     stablehlo.reduce
// MLIR:     call @relu(

// The second read names computations in the emitted order (relu.1, region_0.2; the first
// read had relu.2, region_0.1): names only.
// CHECK:      HloModule jit_g,
// CHECK:      %region_0.{{[0-9]+}} (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
// CHECK:        ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
// CHECK:      %relu.1 (Arg_0.1: f32[4]) -> f32[4] {
// CHECK:        ROOT %max.1 = f32[4]{0} maximum(%Arg_0.1, %broadcast.1)
// CHECK:      ENTRY %main.3 (x.1: f32[4,8]) -> f32[4] {
// CHECK-NEXT:   %x.1 = f32[4,8]{1,0} parameter(0)
// CHECK-NEXT:   %constant.3 = f32[] constant(0)
// CHECK-NEXT:   %reduce_sum.7 = f32[4]{0} reduce(%x.1, %constant.3), dimensions={1}, to_apply=%region_0.{{[0-9]+}}
// CHECK-NEXT:   ROOT %jit_relu_.1 = f32[4]{0} call(%reduce_sum.7), to_apply=%relu.1
// CHECK-NEXT: }
