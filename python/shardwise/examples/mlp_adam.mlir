module @jit_step attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]> {stablehlo.mesh = {axes = [{name = "data", size = 2 : i64}, {name = "model", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg1: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg2: tensor<10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg3: tensor<32x10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg4: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, %arg5: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg6: tensor<i32> {sdy.sharding = #sdy.sharding<@mesh, []>}, %arg7: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg8: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg9: tensor<10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg10: tensor<32x10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg11: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, %arg12: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg13: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg14: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg15: tensor<10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg16: tensor<32x10xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg17: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, %arg18: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg19: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg20: tensor<16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}]>}) -> (tensor<32xf32> {jax.result_info = "result[0]['down']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<64x32xf32> {jax.result_info = "result[0]['down']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, tensor<10xf32> {jax.result_info = "result[0]['head']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<32x10xf32> {jax.result_info = "result[0]['head']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<64xf32> {jax.result_info = "result[0]['up']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, tensor<32x64xf32> {jax.result_info = "result[0]['up']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<i32> {jax.result_info = "result[2][0].count", sdy.sharding = #sdy.sharding<@mesh, []>}, tensor<32xf32> {jax.result_info = "result[2][0].mu['down']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<64x32xf32> {jax.result_info = "result[2][0].mu['down']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, tensor<10xf32> {jax.result_info = "result[2][0].mu['head']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<32x10xf32> {jax.result_info = "result[2][0].mu['head']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<64xf32> {jax.result_info = "result[2][0].mu['up']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, tensor<32x64xf32> {jax.result_info = "result[2][0].mu['up']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<32xf32> {jax.result_info = "result[2][0].nu['down']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<64x32xf32> {jax.result_info = "result[2][0].nu['down']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, tensor<10xf32> {jax.result_info = "result[2][0].nu['head']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<32x10xf32> {jax.result_info = "result[2][0].nu['head']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<64xf32> {jax.result_info = "result[2][0].nu['up']['bias']", sdy.sharding = #sdy.sharding<@mesh, [{"model"}]>}, tensor<32x64xf32> {jax.result_info = "result[2][0].nu['up']['kernel']", sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, tensor<f32> {jax.result_info = "result[3]", sdy.sharding = #sdy.sharding<@mesh, []>}) {
    %0 = stablehlo.dot_general %arg19, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = stablehlo.reshape %arg4 : (tensor<64xf32>) -> tensor<1x64xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x64xf32>) -> tensor<16x64xf32>
    %3 = stablehlo.add %0, %2 : tensor<16x64xf32>
    %4 = call @relu(%3) : (tensor<16x64xf32>) -> tensor<16x64xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x64xf32>
    %6 = stablehlo.compare GT, %3, %5, FLOAT : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xi1>
    %7 = stablehlo.dot_general %4, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    %8 = stablehlo.reshape %arg0 : (tensor<32xf32>) -> tensor<1x32xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<16x32xf32>
    %10 = stablehlo.add %7, %9 : tensor<16x32xf32>
    %11 = call @relu_0(%10) : (tensor<16x32xf32>) -> tensor<16x32xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %13 = stablehlo.compare GT, %10, %12, FLOAT : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xi1>
    %14 = stablehlo.dot_general %11, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x32xf32>, tensor<32x10xf32>) -> tensor<16x10xf32>
    %15 = stablehlo.reshape %arg2 : (tensor<10xf32>) -> tensor<1x10xf32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0, 1] : (tensor<1x10xf32>) -> tensor<16x10xf32>
    %17 = stablehlo.add %14, %16 : tensor<16x10xf32>
    %18 = stablehlo.broadcast_in_dim %arg20, dims = [0] : (tensor<16xi32>) -> tensor<16x1xi32>
    %19:2 = call @take_along_axis(%17, %18) : (tensor<16x10xf32>, tensor<16x1xi32>) -> (tensor<16x1xf32>, tensor<16x1x1xi32>)
    %c = stablehlo.constant dense<0> : tensor<i32>
    %20:2 = call @_take(%19#0, %c) : (tensor<16x1xf32>, tensor<i32>) -> (tensor<16xf32>, tensor<1xi32>)
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %21 = stablehlo.reduce(%17 init: %cst_1) applies stablehlo.maximum across dimensions = [1] : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %23 = stablehlo.maximum %22, %21 : tensor<16xf32>
    %24 = stablehlo.is_finite %23 : (tensor<16xf32>) -> tensor<16xi1>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %26 = stablehlo.select %24, %23, %25 : tensor<16xi1>, tensor<16xf32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [0] : (tensor<16xf32>) -> tensor<16x1xf32>
    %28 = stablehlo.broadcast_in_dim %27, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x10xf32>
    %29 = stablehlo.subtract %17, %28 : tensor<16x10xf32>
    %30 = stablehlo.exponential %29 : tensor<16x10xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %31 = stablehlo.reduce(%30 init: %cst_4) applies stablehlo.add across dimensions = [1] : (tensor<16x10xf32>, tensor<f32>) -> tensor<16xf32>
    %32 = stablehlo.abs %31 : tensor<16xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %34 = stablehlo.compare GE, %31, %33, FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
    %35 = stablehlo.log %32 : tensor<16xf32>
    %36 = stablehlo.add %35, %26 : tensor<16xf32>
    %37 = stablehlo.subtract %36, %20#0 : tensor<16xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %38 = stablehlo.reduce(%37 init: %cst_6) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %cst_7 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %39 = stablehlo.divide %38, %cst_7 : tensor<f32>
    %cst_8 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_9 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %40 = stablehlo.divide %cst_8, %cst_9 : tensor<f32>
    %41 = stablehlo.broadcast_in_dim %40, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %42 = stablehlo.negate %41 : tensor<16xf32>
    %43 = stablehlo.divide %41, %32 : tensor<16xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %44 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %45 = stablehlo.select %34, %44, %43 : tensor<16xi1>, tensor<16xf32>
    %46 = stablehlo.select %34, %43, %44 : tensor<16xi1>, tensor<16xf32>
    %47 = stablehlo.negate %45 : tensor<16xf32>
    %48 = stablehlo.add %46, %47 : tensor<16xf32>
    %49 = stablehlo.broadcast_in_dim %48, dims = [0] : (tensor<16xf32>) -> tensor<16x10xf32>
    %50 = stablehlo.multiply %49, %30 : tensor<16x10xf32>
    %51 = call @_take_1(%20#1, %42) : (tensor<1xi32>, tensor<16xf32>) -> tensor<16x1xf32>
    %52 = call @take_along_axis_2(%19#1, %51) : (tensor<16x1x1xi32>, tensor<16x1xf32>) -> tensor<16x10xf32>
    %53 = stablehlo.add %50, %52 : tensor<16x10xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %54 = stablehlo.reduce(%53 init: %cst_11) applies stablehlo.add across dimensions = [0] : (tensor<16x10xf32>, tensor<f32>) -> tensor<10xf32>
    %55 = stablehlo.reshape %54 : (tensor<10xf32>) -> tensor<1x10xf32>
    %56 = stablehlo.reshape %55 : (tensor<1x10xf32>) -> tensor<10xf32>
    %57 = stablehlo.dot_general %53, %11, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x10xf32>, tensor<16x32xf32>) -> tensor<10x32xf32>
    %58 = stablehlo.transpose %57, dims = [1, 0] : (tensor<10x32xf32>) -> tensor<32x10xf32>
    %59 = stablehlo.dot_general %53, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<16x10xf32>, tensor<32x10xf32>) -> tensor<16x32xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %60 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %61 = stablehlo.select %13, %59, %60 : tensor<16x32xi1>, tensor<16x32xf32>
    %cst_13 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %62 = stablehlo.reduce(%61 init: %cst_13) applies stablehlo.add across dimensions = [0] : (tensor<16x32xf32>, tensor<f32>) -> tensor<32xf32>
    %63 = stablehlo.reshape %62 : (tensor<32xf32>) -> tensor<1x32xf32>
    %64 = stablehlo.reshape %63 : (tensor<1x32xf32>) -> tensor<32xf32>
    %65 = stablehlo.dot_general %61, %4, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x32xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
    %66 = stablehlo.transpose %65, dims = [1, 0] : (tensor<32x64xf32>) -> tensor<64x32xf32>
    %67 = stablehlo.dot_general %61, %arg1, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %68 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<16x64xf32>
    %69 = stablehlo.select %6, %67, %68 : tensor<16x64xi1>, tensor<16x64xf32>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %70 = stablehlo.reduce(%69 init: %cst_15) applies stablehlo.add across dimensions = [0] : (tensor<16x64xf32>, tensor<f32>) -> tensor<64xf32>
    %71 = stablehlo.reshape %70 : (tensor<64xf32>) -> tensor<1x64xf32>
    %72 = stablehlo.reshape %71 : (tensor<1x64xf32>) -> tensor<64xf32>
    %73 = stablehlo.dot_general %69, %arg19, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
    %74 = stablehlo.transpose %73, dims = [1, 0] : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %cst_16 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %75 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %76 = stablehlo.multiply %75, %64 : tensor<32xf32>
    %cst_17 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %77 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %78 = stablehlo.multiply %77, %arg7 : tensor<32xf32>
    %79 = stablehlo.add %76, %78 : tensor<32xf32>
    %cst_18 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %80 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %81 = stablehlo.multiply %80, %66 : tensor<64x32xf32>
    %cst_19 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %82 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %83 = stablehlo.multiply %82, %arg8 : tensor<64x32xf32>
    %84 = stablehlo.add %81, %83 : tensor<64x32xf32>
    %cst_20 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %85 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %86 = stablehlo.multiply %85, %56 : tensor<10xf32>
    %cst_21 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %87 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %88 = stablehlo.multiply %87, %arg9 : tensor<10xf32>
    %89 = stablehlo.add %86, %88 : tensor<10xf32>
    %cst_22 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %90 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %91 = stablehlo.multiply %90, %58 : tensor<32x10xf32>
    %cst_23 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %92 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %93 = stablehlo.multiply %92, %arg10 : tensor<32x10xf32>
    %94 = stablehlo.add %91, %93 : tensor<32x10xf32>
    %cst_24 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %95 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %96 = stablehlo.multiply %95, %72 : tensor<64xf32>
    %cst_25 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %97 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %98 = stablehlo.multiply %97, %arg11 : tensor<64xf32>
    %99 = stablehlo.add %96, %98 : tensor<64xf32>
    %cst_26 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %100 = stablehlo.broadcast_in_dim %cst_26, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %101 = stablehlo.multiply %100, %74 : tensor<32x64xf32>
    %cst_27 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %102 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %103 = stablehlo.multiply %102, %arg12 : tensor<32x64xf32>
    %104 = stablehlo.add %101, %103 : tensor<32x64xf32>
    %105 = stablehlo.multiply %64, %64 : tensor<32xf32>
    %cst_28 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %106 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %107 = stablehlo.multiply %106, %105 : tensor<32xf32>
    %cst_29 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %108 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %109 = stablehlo.multiply %108, %arg13 : tensor<32xf32>
    %110 = stablehlo.add %107, %109 : tensor<32xf32>
    %111 = stablehlo.multiply %66, %66 : tensor<64x32xf32>
    %cst_30 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %112 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %113 = stablehlo.multiply %112, %111 : tensor<64x32xf32>
    %cst_31 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %114 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %115 = stablehlo.multiply %114, %arg14 : tensor<64x32xf32>
    %116 = stablehlo.add %113, %115 : tensor<64x32xf32>
    %117 = stablehlo.multiply %56, %56 : tensor<10xf32>
    %cst_32 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %118 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %119 = stablehlo.multiply %118, %117 : tensor<10xf32>
    %cst_33 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %120 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %121 = stablehlo.multiply %120, %arg15 : tensor<10xf32>
    %122 = stablehlo.add %119, %121 : tensor<10xf32>
    %123 = stablehlo.multiply %58, %58 : tensor<32x10xf32>
    %cst_34 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %124 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %125 = stablehlo.multiply %124, %123 : tensor<32x10xf32>
    %cst_35 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %126 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %127 = stablehlo.multiply %126, %arg16 : tensor<32x10xf32>
    %128 = stablehlo.add %125, %127 : tensor<32x10xf32>
    %129 = stablehlo.multiply %72, %72 : tensor<64xf32>
    %cst_36 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %130 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %131 = stablehlo.multiply %130, %129 : tensor<64xf32>
    %cst_37 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %132 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %133 = stablehlo.multiply %132, %arg17 : tensor<64xf32>
    %134 = stablehlo.add %131, %133 : tensor<64xf32>
    %135 = stablehlo.multiply %74, %74 : tensor<32x64xf32>
    %cst_38 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %136 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %137 = stablehlo.multiply %136, %135 : tensor<32x64xf32>
    %cst_39 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %138 = stablehlo.broadcast_in_dim %cst_39, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %139 = stablehlo.multiply %138, %arg18 : tensor<32x64xf32>
    %140 = stablehlo.add %137, %139 : tensor<32x64xf32>
    %c_40 = stablehlo.constant dense<2147483647> : tensor<i32>
    %141 = stablehlo.compare LT, %arg6, %c_40, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_41 = stablehlo.constant dense<1> : tensor<i32>
    %142 = stablehlo.add %arg6, %c_41 : tensor<i32>
    %c_42 = stablehlo.constant dense<2147483647> : tensor<i32>
    %143 = call @_where_3(%141, %142, %c_42) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_43 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %144 = stablehlo.convert %143 : (tensor<i32>) -> tensor<f32>
    %145 = stablehlo.power %cst_43, %144 : tensor<f32>
    %cst_44 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %146 = stablehlo.subtract %cst_44, %145 : tensor<f32>
    %147 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %148 = stablehlo.divide %79, %147 : tensor<32xf32>
    %149 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %150 = stablehlo.divide %84, %149 : tensor<64x32xf32>
    %151 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %152 = stablehlo.divide %89, %151 : tensor<10xf32>
    %153 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %154 = stablehlo.divide %94, %153 : tensor<32x10xf32>
    %155 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %156 = stablehlo.divide %99, %155 : tensor<64xf32>
    %157 = stablehlo.broadcast_in_dim %146, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %158 = stablehlo.divide %104, %157 : tensor<32x64xf32>
    %cst_45 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %159 = stablehlo.convert %143 : (tensor<i32>) -> tensor<f32>
    %160 = stablehlo.power %cst_45, %159 : tensor<f32>
    %cst_46 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %161 = stablehlo.subtract %cst_46, %160 : tensor<f32>
    %162 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %163 = stablehlo.divide %110, %162 : tensor<32xf32>
    %164 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %165 = stablehlo.divide %116, %164 : tensor<64x32xf32>
    %166 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %167 = stablehlo.divide %122, %166 : tensor<10xf32>
    %168 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %169 = stablehlo.divide %128, %168 : tensor<32x10xf32>
    %170 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %171 = stablehlo.divide %134, %170 : tensor<64xf32>
    %172 = stablehlo.broadcast_in_dim %161, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %173 = stablehlo.divide %140, %172 : tensor<32x64xf32>
    %cst_47 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %174 = stablehlo.broadcast_in_dim %cst_47, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %175 = stablehlo.add %163, %174 : tensor<32xf32>
    %176 = stablehlo.sqrt %175 : tensor<32xf32>
    %cst_48 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %177 = stablehlo.broadcast_in_dim %cst_48, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %178 = stablehlo.add %176, %177 : tensor<32xf32>
    %179 = stablehlo.divide %148, %178 : tensor<32xf32>
    %cst_49 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %180 = stablehlo.broadcast_in_dim %cst_49, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %181 = stablehlo.add %165, %180 : tensor<64x32xf32>
    %182 = stablehlo.sqrt %181 : tensor<64x32xf32>
    %cst_50 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %183 = stablehlo.broadcast_in_dim %cst_50, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %184 = stablehlo.add %182, %183 : tensor<64x32xf32>
    %185 = stablehlo.divide %150, %184 : tensor<64x32xf32>
    %cst_51 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %186 = stablehlo.broadcast_in_dim %cst_51, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %187 = stablehlo.add %167, %186 : tensor<10xf32>
    %188 = stablehlo.sqrt %187 : tensor<10xf32>
    %cst_52 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %189 = stablehlo.broadcast_in_dim %cst_52, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %190 = stablehlo.add %188, %189 : tensor<10xf32>
    %191 = stablehlo.divide %152, %190 : tensor<10xf32>
    %cst_53 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %192 = stablehlo.broadcast_in_dim %cst_53, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %193 = stablehlo.add %169, %192 : tensor<32x10xf32>
    %194 = stablehlo.sqrt %193 : tensor<32x10xf32>
    %cst_54 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %195 = stablehlo.broadcast_in_dim %cst_54, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %196 = stablehlo.add %194, %195 : tensor<32x10xf32>
    %197 = stablehlo.divide %154, %196 : tensor<32x10xf32>
    %cst_55 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %198 = stablehlo.broadcast_in_dim %cst_55, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %199 = stablehlo.add %171, %198 : tensor<64xf32>
    %200 = stablehlo.sqrt %199 : tensor<64xf32>
    %cst_56 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %201 = stablehlo.broadcast_in_dim %cst_56, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %202 = stablehlo.add %200, %201 : tensor<64xf32>
    %203 = stablehlo.divide %156, %202 : tensor<64xf32>
    %cst_57 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %204 = stablehlo.broadcast_in_dim %cst_57, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %205 = stablehlo.add %173, %204 : tensor<32x64xf32>
    %206 = stablehlo.sqrt %205 : tensor<32x64xf32>
    %cst_58 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %207 = stablehlo.broadcast_in_dim %cst_58, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %208 = stablehlo.add %206, %207 : tensor<32x64xf32>
    %209 = stablehlo.divide %158, %208 : tensor<32x64xf32>
    %cst_59 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %210 = stablehlo.broadcast_in_dim %cst_59, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %211 = stablehlo.multiply %210, %179 : tensor<32xf32>
    %cst_60 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %212 = stablehlo.broadcast_in_dim %cst_60, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
    %213 = stablehlo.multiply %212, %185 : tensor<64x32xf32>
    %cst_61 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %214 = stablehlo.broadcast_in_dim %cst_61, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %215 = stablehlo.multiply %214, %191 : tensor<10xf32>
    %cst_62 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %216 = stablehlo.broadcast_in_dim %cst_62, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %217 = stablehlo.multiply %216, %197 : tensor<32x10xf32>
    %cst_63 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %218 = stablehlo.broadcast_in_dim %cst_63, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %219 = stablehlo.multiply %218, %203 : tensor<64xf32>
    %cst_64 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %220 = stablehlo.broadcast_in_dim %cst_64, dims = [] : (tensor<f32>) -> tensor<32x64xf32>
    %221 = stablehlo.multiply %220, %209 : tensor<32x64xf32>
    %222 = stablehlo.add %arg0, %211 : tensor<32xf32>
    %223 = stablehlo.add %arg1, %213 : tensor<64x32xf32>
    %224 = stablehlo.add %arg2, %215 : tensor<10xf32>
    %225 = stablehlo.add %arg3, %217 : tensor<32x10xf32>
    %226 = stablehlo.add %arg4, %219 : tensor<64xf32>
    %227 = stablehlo.add %arg5, %221 : tensor<32x64xf32>
    return %222, %223, %224, %225, %226, %227, %143, %79, %84, %89, %94, %99, %104, %110, %116, %122, %128, %134, %140, %39 : tensor<32xf32>, tensor<64x32xf32>, tensor<10xf32>, tensor<32x10xf32>, tensor<64xf32>, tensor<32x64xf32>, tensor<i32>, tensor<32xf32>, tensor<64x32xf32>, tensor<10xf32>, tensor<32x10xf32>, tensor<64xf32>, tensor<32x64xf32>, tensor<32xf32>, tensor<64x32xf32>, tensor<10xf32>, tensor<32x10xf32>, tensor<64xf32>, tensor<32x64xf32>, tensor<f32>
  }
  func.func private @relu(%arg0: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x64xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<16x64xf32>
    return %1 : tensor<16x64xf32>
  }
  func.func private @relu_0(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<16x32xf32>
    return %1 : tensor<16x32xf32>
  }
  func.func private @take_along_axis(%arg0: tensor<16x10xf32>, %arg1: tensor<16x1xi32>) -> (tensor<16x1xf32>, tensor<16x1x1xi32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<16x1xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x1xi1>
    %c_0 = stablehlo.constant dense<10> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<16x1xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<16x1xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<16x1xi1>, tensor<16x1xi32>
    %5 = stablehlo.reshape %4 : (tensor<16x1xi32>) -> tensor<16x1x1xi32>
    %c_1 = stablehlo.constant dense<9> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<16x1x1xi32>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<16x1x1xi32>, tensor<16x1x1xi32>) -> tensor<16x1x1xi1>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [2] : (tensor<1xi32>) -> tensor<1x1x1xi32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2] : (tensor<1x1x1xi32>) -> tensor<16x1x1xi32>
    %10 = stablehlo.compare LE, %5, %9, SIGNED : (tensor<16x1x1xi32>, tensor<16x1x1xi32>) -> tensor<16x1x1xi1>
    %11 = stablehlo.and %7, %10 : tensor<16x1x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %12 = stablehlo.reduce(%11 init: %c_3) applies stablehlo.and across dimensions = [2] : (tensor<16x1x1xi1>, tensor<i1>) -> tensor<16x1xi1>
    %13 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<16x10xf32>, tensor<16x1x1xi32>) -> tensor<16x1xf32>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x1xf32>
    %15 = stablehlo.select %12, %13, %14 : tensor<16x1xi1>, tensor<16x1xf32>
    return %15, %5 : tensor<16x1xf32>, tensor<16x1x1xi32>
  }
  func.func private @_take(%arg0: tensor<16x1xf32>, %arg1: tensor<i32>) -> (tensor<16xf32>, tensor<1xi32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = call @_where(%0, %1, %arg1) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<1xi32>
    %4 = stablehlo.convert %3 : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %6 = stablehlo.compare GE, %4, %5, SIGNED : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi1>
    %7 = stablehlo.compare LE, %4, %c_1, SIGNED : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi1>
    %8 = stablehlo.and %6, %7 : tensor<1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %9 = stablehlo.reduce(%8 init: %c_3) applies stablehlo.and across dimensions = [0] : (tensor<1xi1>, tensor<i1>) -> tensor<i1>
    %10 = "stablehlo.gather"(%arg0, %4) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1]>, indices_are_sorted = false, slice_sizes = array<i64: 16, 1>}> : (tensor<16x1xf32>, tensor<1xi32>) -> tensor<16xf32>
    %11 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<i1>) -> tensor<16xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %13 = stablehlo.select %11, %10, %12 : tensor<16xi1>, tensor<16xf32>
    return %13, %3 : tensor<16xf32>, tensor<1xi32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @_take_1(%arg0: tensor<1xi32>, %arg1: tensor<16xf32>) -> tensor<16x1xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x1xf32>
    %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %2 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<16x1xf32>, tensor<1xi32>, tensor<16xf32>) -> tensor<16x1xf32>
    return %1 : tensor<16x1xf32>
  }
  func.func private @take_along_axis_2(%arg0: tensor<16x1x1xi32>, %arg1: tensor<16x1xf32>) -> tensor<16x10xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x10xf32>
    %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 2>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %2 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<16x10xf32>, tensor<16x1x1xi32>, tensor<16x1xf32>) -> tensor<16x10xf32>
    return %1 : tensor<16x10xf32>
  }
  func.func private @_where_3(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
}
