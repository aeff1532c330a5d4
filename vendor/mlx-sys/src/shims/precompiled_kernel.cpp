// quest patch: a C entry point for MLX's `fast::precompiled_cuda_kernel`, which mlx-c 0.7
// does not wrap. It takes a kernel already compiled (a CUBIN, or PTX) by its symbol name,
// so a process can hand MLX a kernel it compiled in an earlier one, where MLX's
// source-text custom kernels compile again in every process. In the style of mlx-c's
// own wrappers (mlx/c/fast.cpp): errors go through mlx_error and return 1.

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "mlx/c/error.h"
#include "mlx/c/private/mlx.h"
#include "mlx/fast.h"

extern "C" int quest_precompiled_cuda_kernel(
    mlx_vector_array* outputs,
    const char* name,
    const char* binary,
    size_t binary_len,
    const mlx_vector_array inputs,
    const int* output_shapes, // every output's dimensions, one after another
    const size_t* output_ndims,
    const mlx_dtype* output_dtypes,
    size_t num_outputs,
    const int* int_scalars, // passed after the outputs, each as an int32
    size_t num_scalars,
    int grid_x,
    int grid_y,
    int grid_z,
    int block_x,
    int block_y,
    int block_z,
    int shared_memory,
    bool ensure_row_contiguous,
    const mlx_stream stream) {
  try {
    std::vector<mlx::core::Shape> shapes;
    std::vector<mlx::core::Dtype> dtypes;
    size_t at = 0;
    for (size_t i = 0; i < num_outputs; ++i) {
      shapes.emplace_back(output_shapes + at, output_shapes + at + output_ndims[i]);
      at += output_ndims[i];
      dtypes.push_back(mlx_dtype_to_cpp(output_dtypes[i]));
    }
    std::vector<mlx::core::fast::ScalarArg> scalars;
    for (size_t i = 0; i < num_scalars; ++i) {
      scalars.emplace_back(int_scalars[i]);
    }
    mlx_vector_array_set_(
        *outputs,
        mlx::core::fast::precompiled_cuda_kernel(
            name,
            std::string(binary, binary_len),
            mlx_vector_array_get_(inputs),
            shapes,
            dtypes,
            scalars,
            std::make_tuple(grid_x, grid_y, grid_z),
            std::make_tuple(block_x, block_y, block_z),
            shared_memory,
            std::nullopt,
            ensure_row_contiguous,
            mlx_stream_get_(stream)));
  } catch (std::exception& e) {
    mlx_error(e.what());
    return 1;
  }
  return 0;
}
