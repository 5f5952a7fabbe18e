// wgmma.mma_async m64n32k32 INT8 -> INT32 (Hopper, sm_90a) for the one-pass gates, with A and B
// in shared memory K-major without swizzle: 8 x 16-byte core matrices of 128 bytes,
// the two of a 32-byte k step adjacent (leading byte offset 128), the 8-row groups `sbo` bytes
// apart (PTX ISA, "Shared Memory Matrix Layout", "Matrix Descriptor Format"). The fences, commit
// and wait come from hopper.cuh.
#ifndef OZSIM_WGMMA_S8_CUH
#define OZSIM_WGMMA_S8_CUH
#include "../ozaki2/kernels/hopper.cuh"

// byte offset of (row r, k byte kk) in a K-major no-swizzle operand whose rows hold `kd` bytes
__device__ __host__ __forceinline__ constexpr unsigned core_offset(int r, int kk, int kd)
{
    return (unsigned)((r >> 3) * 8 * kd + (kk >> 4) * 128 + (r & 7) * 16 + (kk & 15));
}

// descriptor of such an operand at shared-memory address `addr` (16-byte aligned), as its two
// words: the low one holds the start address / 16 (bits 0-13) and the leading byte offset / 16
// (bits 16-29): 128, the k-adjacent core matrix; the high one the stride byte offset / 16 (bits
// 32-45): 8 kd, the next 8 rows; no swizzle. An operand `off` bytes further (a k step: 256) is
// desc_lo(addr) + off / 16: the address field does not carry below 256 KiB.
__device__ __forceinline__ u32 desc_lo(u32 addr) { return ((addr & 0x3FFFF) >> 4) | ((128 >> 4) << 16); }
#define DESC_HI(kd) ((u32)((8 * (kd)) >> 4))

// keeps the compiler from moving accumulator reads above the wait (wgmma writes asynchronously)
__device__ __forceinline__ void fence_acc16(int (&d)[16])
{
#pragma unroll
    for (int i = 0; i < 16; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}

#define OZSIM_WGMMA_D16 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define OZSIM_WGMMA_OUT16(d) \
    "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), \
    "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), \
    "+r"(d[14]), "+r"(d[15])

// D (64 x 32 INT32 of the warpgroup, 16 a thread in the mma.sync C layout per 8 columns) = A B
// (+ D if accumulate): A (64 rows) and B (32 columns) by descriptor, the descriptors' low words
// given, their high words both `hi` (operands with rows of the same length)
__device__ __forceinline__ void wgmma_n32_ss(int (&d)[16], u32 da_lo, u32 db_lo, u32 hi,
                                             int accumulate)
{
    asm volatile("{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %19, 0;\n"
                 "mov.b64 da, {%16, %18};\nmov.b64 db, {%17, %18};\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 " OZSIM_WGMMA_D16
                 ", da, db, p;\n}\n"
                 : OZSIM_WGMMA_OUT16(d)
                 : "r"(da_lo), "r"(db_lo), "r"(hi), "r"(accumulate));
}

#endif  // OZSIM_WGMMA_S8_CUH
