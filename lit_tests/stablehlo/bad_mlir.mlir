// RUN: not hlopass-opt %s 2>&1 | filecheck %s -DFILE=%s
// Invalid MLIR gives MLIR's diagnostic as one line at its place in this file.

module {
  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.add %a, %b : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// CHECK: [[FILE]]:6:28: error: use of undeclared SSA value name
// CHECK-NOT: {{.}}
