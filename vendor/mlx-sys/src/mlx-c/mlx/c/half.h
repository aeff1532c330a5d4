/* Copyright © 2023-2024 Apple Inc. */

#ifndef MLX_HALF_H
#define MLX_HALF_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC) || defined(__aarch64__)
#define HAS_FLOAT16
#include <arm_fp16.h>
typedef __fp16 float16_t;
#endif

#if defined(__ARM_FEATURE_BF16) || defined(__aarch64__)
#define HAS_BFLOAT16
#include <arm_bf16.h>
typedef __bf16 bfloat16_t;
#endif

/* quest patch: outside ARM there is no native half type that C, C++ and
 * bindgen agree on. mlx-c only copies half values (item, data pointers), never
 * computes on them, so a 16-bit storage type carries the exact bits. */
#if !defined(HAS_FLOAT16)
#include <stdint.h>
#define HAS_FLOAT16
typedef uint16_t float16_t;
#endif

#if !defined(HAS_BFLOAT16)
#include <stdint.h>
#define HAS_BFLOAT16
typedef uint16_t bfloat16_t;
#endif

#ifdef __cplusplus
}
#endif

#endif
