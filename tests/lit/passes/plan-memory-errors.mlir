// ninfer-plan-memory rejects a step size that cannot be planned.
// RUN: not ninfer-opt %s --ninfer-plan-memory="max-step-tokens=0" 2>&1 | FileCheck %s

// CHECK: error: max-step-tokens must be in [1, 1048576], got 0
func.func @forward(%tokens: tensor<?xi32>) -> tensor<1xi32> {
  %table = ninfer.weight "embed" : tensor<16x32xbf16>
  %x = ninfer.embedding %tokens, %table : (tensor<?xi32>, tensor<16x32xbf16>) -> tensor<?x32xf32>
  %l = ninfer.lm_head %x, %table : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<1x16xf32>
  %t = ninfer.sample %l : (tensor<1x16xf32>) -> tensor<1xi32>
  return %t : tensor<1xi32>
}
