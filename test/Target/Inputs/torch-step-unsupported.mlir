flexsn.neuron @cube_root inputs(%x: f32) states() outputs(y) {
  %y = math.cbrt %x : f32
  flexsn.yield %y : f32
}
