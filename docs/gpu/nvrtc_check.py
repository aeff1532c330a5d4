#!/usr/bin/env python3
"""Compile quest's CUDA kernels with NVRTC on a machine without a GPU.

A device session has 30 minutes; a kernel that does not compile costs a carry. So before
carrying, write every kernel as MLX's CUDA backend would compile it and compile each here:

    quest dev kernels --out /tmp/quest-kernels
    python3 docs/gpu/nvrtc_check.py /tmp/quest-kernels

It needs NVRTC and three sets of headers, none of which a CPU build has (paths by env):
  NVRTC        libnvrtc.so.13, from PyPI's `nvidia-cuda-nvrtc` (13.x) wheel:
               nvidia/cu13/lib/libnvrtc.so.13
  CUDA_INCLUDE CUDA's headers, from PyPI's `nvidia-cuda-runtime` (13.x) wheel: nvidia/cu13/include
  CCCL_INCLUDE libcu++, from the `mlx-cuda-13==0.32.2` wheel: mlx/include/cccl
  MLX_INCLUDE  a folder holding mlx/backend/cuda/device/*.cuh from MLX's sources at the
               wheel's version (MLX embeds them in libmlx and hands them to NVRTC itself)
  ARCH         the GPU architecture (default compute_90a: the H200)
As MLX does, with --device-as-default-execution-space. Exit 0 when every kernel compiles.
"""
import ctypes
import os
import pathlib
import sys


def main() -> int:
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/quest-kernels")
    sources = sorted(folder.glob("*.cu"))
    if not sources:
        print(f"nvrtc_check.py: no .cu files in {folder}; run `quest dev kernels --out {folder}` first")
        return 2
    missing = [v for v in ("NVRTC", "CUDA_INCLUDE", "CCCL_INCLUDE", "MLX_INCLUDE") if not os.environ.get(v)]
    if missing:
        print(f"nvrtc_check.py: set {', '.join(missing)} (see the top of this file)")
        return 2
    nvrtc = ctypes.CDLL(os.environ["NVRTC"])
    options = [b"--device-as-default-execution-space",
               f"--gpu-architecture={os.environ.get('ARCH', 'compute_90a')}".encode()]
    options += [f"--include-path={os.environ[v]}".encode()
                for v in ("MLX_INCLUDE", "CCCL_INCLUDE", "CUDA_INCLUDE")]
    failed = 0
    for path in sources:
        program = ctypes.c_void_p()
        if nvrtc.nvrtcCreateProgram(ctypes.byref(program), path.read_bytes(), path.name.encode(),
                                    0, None, None) != 0:
            print(f"{path.name}: NVRTC could not take the source")
            failed += 1
            continue
        args = (ctypes.c_char_p * len(options))(*options)
        result = nvrtc.nvrtcCompileProgram(program, len(options), args)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
        errors = [line for line in log.value.decode(errors="replace").splitlines() if "error" in line]
        print(f"{path.name}: {'compiles' if result == 0 else 'FAILS'}")
        if result != 0:
            failed += 1
            print("\n".join(errors or log.value.decode(errors="replace").splitlines()[:40]))
    print(f"{len(sources) - failed} of {len(sources)} kernels compile")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
