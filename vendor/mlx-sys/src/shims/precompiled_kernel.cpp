// quest patch: a C entry point for MLX's `fast::precompiled_cuda_kernel`, which mlx-c 0.7
// does not wrap. It takes a kernel already compiled (a CUBIN, or PTX) by its symbol name,
// so a process can hand MLX a kernel it compiled in an earlier one, where MLX's
// source-text custom kernels compile again in every process. In the style of mlx-c's
// own wrappers (mlx/c/fast.cpp): errors go through mlx_error and return 1.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "mlx/c/error.h"
#include "mlx/c/private/mlx.h"
#include "mlx/fast.h"
#include "mlx/version.h"

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

// quest patch: puts a compiled kernel's image where MLX 0.32.2's CUDA backend looks for a
// module before it asks for one (mlx/backend/cuda/jit_module.cpp: `ptx_cache_dir`,
// `get_ptx_path`, `read_cached_ptx`), under the module name MLX derives for a precompiled
// kernel called `name` whose "source" is `key` (custom_kernel.cpp, `CustomKernel::eval_gpu`:
// `{name}_{std::hash(source):x}`). A call that then hands MLX the short `key` instead of the
// image runs the same kernel: MLX reads the image from this file once per process, where
// it copied the image twice into every call's node and hashed all of it at every launch.
// Written as MLX reads it: the image as `<module>.ptx` (the driver takes a CUBIN there as
// well as PTX), the kernel's name twice on a line of `<module>.txt`; the names file first
// and each file whole (a temporary file renamed), so a reader never finds half of either.
// Returns 0 when the files hold `binary`, 1 when they cannot (then `what` says why): the
// module's file name on success too, for the caller to say where it went.
namespace {

bool write_whole(
    const std::filesystem::path& path,
    const std::string& bytes,
    std::error_code& error) {
  auto partial = path;
  partial += "." + std::to_string(::getpid()) + ".partial";
  bool written;
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size());
    out.close();
    written = !out.fail();
  }
  if (written) {
    std::filesystem::rename(partial, path, error);
  } else {
    error = std::make_error_code(std::errc::io_error);
  }
  if (error) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
  }
  return !error;
}

bool holds(const std::filesystem::path& path, const std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  std::string found(
      (std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return found == bytes;
}

} // namespace

extern "C" int quest_place_precompiled_module(
    const char* folder, // NULL: the folder MLX reads (a test passes its own)
    const char* name,
    const char* key,
    const char* binary,
    size_t binary_len,
    char* what,
    size_t what_len) {
  auto fail = [&](const std::string& why) {
    std::snprintf(what, what_len, "%s", why.c_str());
    return 1;
  };
  try {
    std::filesystem::path dir;
    if (folder) {
      dir = folder;
    } else if (auto c = std::getenv("MLX_PTX_CACHE_DIR"); c) {
      dir = c;
    } else {
      dir = std::filesystem::temp_directory_path() / "mlx" /
          mlx::core::version() / "ptx";
    }
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error || !std::filesystem::is_directory(dir)) {
      return fail("MLX's kernel cache folder " + dir.string() + " cannot be made");
    }
    char hash[32];
    std::snprintf(
        hash, sizeof hash, "%zx", std::hash<std::string>{}(std::string(key)));
    std::string module = std::string(name) + "_" + hash;
    // MLX splits longer names into folders (get_ptx_path); quest's are far shorter.
    if (module.size() > 245) {
      return fail("the module name " + module + " is longer than MLX keeps in one file");
    }
    std::string image(binary, binary_len);
    auto ptx = dir / (module + ".ptx");
    auto txt = dir / (module + ".txt");
    std::string names = std::string(name) + "\t" + name + "\n";
    if (!holds(txt, names) && !write_whole(txt, names, error)) {
      return fail("cannot write " + txt.string() + ": " + error.message());
    }
    if (!holds(ptx, image) && !write_whole(ptx, image, error)) {
      return fail("cannot write " + ptx.string() + ": " + error.message());
    }
    std::snprintf(what, what_len, "%s", ptx.string().c_str());
    return 0;
  } catch (std::exception& e) {
    return fail(e.what());
  }
}
