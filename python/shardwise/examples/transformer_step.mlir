module @jit_loss attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<64x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %arg1: tensor<256x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}, %arg2: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %arg3: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}, %arg4: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %arg5: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %arg6: tensor<8x32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<64x256xf32> {jax.result_info = "result[1][0]['w1']"}, tensor<256x64xf32> {jax.result_info = "result[1][0]['w2']"}, tensor<64x64xf32> {jax.result_info = "result[1][0]['wk']"}, tensor<64x64xf32> {jax.result_info = "result[1][0]['wo']"}, tensor<64x64xf32> {jax.result_info = "result[1][0]['wq']"}, tensor<64x64xf32> {jax.result_info = "result[1][0]['wv']"}) {
    %0 = stablehlo.dot_general %arg6, %arg4, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x64xf32>) -> tensor<8x32x64xf32>
    %1 = stablehlo.dot_general %arg6, %arg2, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x64xf32>) -> tensor<8x32x64xf32>
    %2 = stablehlo.dot_general %arg6, %arg5, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x64xf32>) -> tensor<8x32x64xf32>
    %3 = stablehlo.reshape %0 : (tensor<8x32x64xf32>) -> tensor<8x32x4x16xf32>
    %4 = stablehlo.reshape %1 : (tensor<8x32x64xf32>) -> tensor<8x32x4x16xf32>
    %5 = stablehlo.reshape %2 : (tensor<8x32x64xf32>) -> tensor<8x32x4x16xf32>
    %6 = stablehlo.dot_general %3, %4, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x32x4x16xf32>, tensor<8x32x4x16xf32>) -> tensor<8x4x32x32xf32>
    %cst = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x4x32x32xf32>
    %8 = stablehlo.divide %6, %7 : tensor<8x4x32x32xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %9 = stablehlo.reduce(%8 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<8x4x32x32xf32>, tensor<f32>) -> tensor<8x4x32xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x4x32xf32>
    %11 = stablehlo.maximum %10, %9 : tensor<8x4x32xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2] : (tensor<8x4x32xf32>) -> tensor<8x4x32x1xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1, 2, 3] : (tensor<8x4x32x1xf32>) -> tensor<8x4x32x32xf32>
    %14 = stablehlo.subtract %8, %13 : tensor<8x4x32x32xf32>
    %15 = stablehlo.exponential %14 : tensor<8x4x32x32xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %16 = stablehlo.reduce(%15 init: %cst_2) applies stablehlo.add across dimensions = [3] : (tensor<8x4x32x32xf32>, tensor<f32>) -> tensor<8x4x32xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1, 2] : (tensor<8x4x32xf32>) -> tensor<8x4x32x1xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2, 3] : (tensor<8x4x32x1xf32>) -> tensor<8x4x32x32xf32>
    %19 = stablehlo.divide %15, %18 : tensor<8x4x32x32xf32>
    %20 = stablehlo.multiply %17, %17 : tensor<8x4x32x1xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x4x32x1xf32>
    %22 = stablehlo.divide %21, %20 : tensor<8x4x32x1xf32>
    %23 = stablehlo.dot_general %5, %19, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x32x4x16xf32>, tensor<8x4x32x32xf32>) -> tensor<8x4x16x32xf32>
    %24 = stablehlo.transpose %23, dims = [0, 3, 1, 2] : (tensor<8x4x16x32xf32>) -> tensor<8x32x4x16xf32>
    %25 = stablehlo.reshape %24 : (tensor<8x32x4x16xf32>) -> tensor<8x32x64xf32>
    %26 = stablehlo.dot_general %25, %arg3, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x64xf32>) -> tensor<8x32x64xf32>
    %27 = stablehlo.add %arg6, %26 : tensor<8x32x64xf32>
    %28 = stablehlo.dot_general %27, %arg0, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x256xf32>) -> tensor<8x32x256xf32>
    %29 = stablehlo.multiply %28, %28 : tensor<8x32x256xf32>
    %30 = stablehlo.multiply %29, %28 : tensor<8x32x256xf32>
    %31 = stablehlo.multiply %28, %28 : tensor<8x32x256xf32>
    %cst_4 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %32 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %33 = stablehlo.multiply %32, %31 : tensor<8x32x256xf32>
    %cst_5 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %34 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %35 = stablehlo.multiply %34, %30 : tensor<8x32x256xf32>
    %36 = stablehlo.add %28, %35 : tensor<8x32x256xf32>
    %cst_6 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %37 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %38 = stablehlo.multiply %37, %36 : tensor<8x32x256xf32>
    %39 = stablehlo.tanh %38 : tensor<8x32x256xf32>
    %cst_7 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %40 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %41 = stablehlo.subtract %40, %39 : tensor<8x32x256xf32>
    %cst_8 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %43 = stablehlo.add %42, %39 : tensor<8x32x256xf32>
    %cst_9 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %44 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %45 = stablehlo.multiply %44, %43 : tensor<8x32x256xf32>
    %46 = stablehlo.multiply %28, %45 : tensor<8x32x256xf32>
    %47 = stablehlo.dot_general %46, %arg1, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32x256xf32>, tensor<256x64xf32>) -> tensor<8x32x64xf32>
    %48 = stablehlo.add %27, %47 : tensor<8x32x64xf32>
    %49 = stablehlo.multiply %48, %48 : tensor<8x32x64xf32>
    %cst_10 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8x32x64xf32>
    %51 = stablehlo.multiply %50, %48 : tensor<8x32x64xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %52 = stablehlo.reduce(%49 init: %cst_11) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<8x32x64xf32>, tensor<f32>) -> tensor<f32>
    %cst_12 = stablehlo.constant dense<1.638400e+04> : tensor<f32>
    %53 = stablehlo.divide %52, %cst_12 : tensor<f32>
    %cst_13 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_14 = stablehlo.constant dense<1.638400e+04> : tensor<f32>
    %54 = stablehlo.divide %cst_13, %cst_14 : tensor<f32>
    %55 = stablehlo.broadcast_in_dim %54, dims = [] : (tensor<f32>) -> tensor<8x32x64xf32>
    %56 = stablehlo.multiply %55, %51 : tensor<8x32x64xf32>
    %57 = stablehlo.dot_general %56, %46, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<8x32x256xf32>) -> tensor<64x256xf32>
    %58 = stablehlo.transpose %57, dims = [1, 0] : (tensor<64x256xf32>) -> tensor<256x64xf32>
    %59 = stablehlo.dot_general %56, %arg1, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<256x64xf32>) -> tensor<8x32x256xf32>
    %60 = stablehlo.multiply %28, %59 : tensor<8x32x256xf32>
    %61 = stablehlo.multiply %59, %45 : tensor<8x32x256xf32>
    %cst_15 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %62 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %63 = stablehlo.multiply %62, %60 : tensor<8x32x256xf32>
    %64 = stablehlo.multiply %63, %41 : tensor<8x32x256xf32>
    %65 = stablehlo.multiply %64, %39 : tensor<8x32x256xf32>
    %66 = stablehlo.add %64, %65 : tensor<8x32x256xf32>
    %cst_16 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %67 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %68 = stablehlo.multiply %67, %66 : tensor<8x32x256xf32>
    %69 = stablehlo.add %61, %68 : tensor<8x32x256xf32>
    %cst_17 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %70 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<8x32x256xf32>
    %71 = stablehlo.multiply %70, %68 : tensor<8x32x256xf32>
    %72 = stablehlo.multiply %71, %33 : tensor<8x32x256xf32>
    %73 = stablehlo.add %69, %72 : tensor<8x32x256xf32>
    %74 = stablehlo.dot_general %73, %27, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x256xf32>, tensor<8x32x64xf32>) -> tensor<256x64xf32>
    %75 = stablehlo.transpose %74, dims = [1, 0] : (tensor<256x64xf32>) -> tensor<64x256xf32>
    %76 = stablehlo.dot_general %73, %arg0, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x256xf32>, tensor<64x256xf32>) -> tensor<8x32x64xf32>
    %77 = stablehlo.add %56, %76 : tensor<8x32x64xf32>
    %78 = stablehlo.dot_general %77, %25, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<8x32x64xf32>) -> tensor<64x64xf32>
    %79 = stablehlo.transpose %78, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %80 = stablehlo.dot_general %77, %arg3, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<64x64xf32>) -> tensor<8x32x64xf32>
    %81 = stablehlo.reshape %80 : (tensor<8x32x64xf32>) -> tensor<8x32x4x16xf32>
    %82 = stablehlo.transpose %81, dims = [0, 2, 3, 1] : (tensor<8x32x4x16xf32>) -> tensor<8x4x16x32xf32>
    %83 = stablehlo.dot_general %82, %5, batching_dims = [0, 1] x [0, 2], contracting_dims = [2] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x4x16x32xf32>, tensor<8x32x4x16xf32>) -> tensor<8x4x32x32xf32>
    %84 = stablehlo.dot_general %82, %19, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<8x4x16x32xf32>, tensor<8x4x32x32xf32>) -> tensor<8x4x16x32xf32>
    %85 = stablehlo.transpose %84, dims = [0, 3, 1, 2] : (tensor<8x4x16x32xf32>) -> tensor<8x32x4x16xf32>
    %86 = stablehlo.broadcast_in_dim %22, dims = [0, 1, 2, 3] : (tensor<8x4x32x1xf32>) -> tensor<8x4x32x32xf32>
    %87 = stablehlo.multiply %83, %86 : tensor<8x4x32x32xf32>
    %88 = stablehlo.multiply %87, %15 : tensor<8x4x32x32xf32>
    %cst_18 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %89 = stablehlo.reduce(%88 init: %cst_18) applies stablehlo.add across dimensions = [3] : (tensor<8x4x32x32xf32>, tensor<f32>) -> tensor<8x4x32xf32>
    %90 = stablehlo.reshape %89 : (tensor<8x4x32xf32>) -> tensor<8x4x32x1xf32>
    %91 = stablehlo.negate %90 : tensor<8x4x32x1xf32>
    %92 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2, 3] : (tensor<8x4x32x1xf32>) -> tensor<8x4x32x32xf32>
    %93 = stablehlo.divide %83, %92 : tensor<8x4x32x32xf32>
    %cst_19 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %94 = stablehlo.reduce(%91 init: %cst_19) applies stablehlo.add across dimensions = [3] : (tensor<8x4x32x1xf32>, tensor<f32>) -> tensor<8x4x32xf32>
    %95 = stablehlo.broadcast_in_dim %94, dims = [0, 1, 2] : (tensor<8x4x32xf32>) -> tensor<8x4x32x32xf32>
    %96 = stablehlo.add %93, %95 : tensor<8x4x32x32xf32>
    %97 = stablehlo.multiply %96, %15 : tensor<8x4x32x32xf32>
    %cst_20 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %98 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<8x4x32x32xf32>
    %99 = stablehlo.divide %97, %98 : tensor<8x4x32x32xf32>
    %100 = stablehlo.dot_general %99, %3, batching_dims = [0, 1] x [0, 2], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x4x32x32xf32>, tensor<8x32x4x16xf32>) -> tensor<8x4x32x16xf32>
    %101 = stablehlo.transpose %100, dims = [0, 2, 1, 3] : (tensor<8x4x32x16xf32>) -> tensor<8x32x4x16xf32>
    %102 = stablehlo.dot_general %99, %4, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x4x32x32xf32>, tensor<8x32x4x16xf32>) -> tensor<8x4x32x16xf32>
    %103 = stablehlo.transpose %102, dims = [0, 2, 1, 3] : (tensor<8x4x32x16xf32>) -> tensor<8x32x4x16xf32>
    %104 = stablehlo.reshape %85 : (tensor<8x32x4x16xf32>) -> tensor<8x32x64xf32>
    %105 = stablehlo.reshape %101 : (tensor<8x32x4x16xf32>) -> tensor<8x32x64xf32>
    %106 = stablehlo.reshape %103 : (tensor<8x32x4x16xf32>) -> tensor<8x32x64xf32>
    %107 = stablehlo.dot_general %104, %arg6, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<8x32x64xf32>) -> tensor<64x64xf32>
    %108 = stablehlo.transpose %107, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %109 = stablehlo.dot_general %105, %arg6, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<8x32x64xf32>) -> tensor<64x64xf32>
    %110 = stablehlo.transpose %109, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %111 = stablehlo.dot_general %106, %arg6, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x32x64xf32>, tensor<8x32x64xf32>) -> tensor<64x64xf32>
    %112 = stablehlo.transpose %111, dims = [1, 0] : (tensor<64x64xf32>) -> tensor<64x64xf32>
    return %53, %75, %58, %110, %79, %112, %108 : tensor<f32>, tensor<64x256xf32>, tensor<256x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
  }
}
