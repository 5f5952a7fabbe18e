// mma.sync m16n8k32 s8 x s8 -> s32, c += a b (PTX ISA, "Matrix fragments for mma.m16n8k32"):
// the INT8 tensor-core product of the one-pass gates (mma_gate.cuh) and of scheme II's GEMM-path
// residues (crt_residues_tc.cu)
#ifndef OZSIM_MMA_S8_CUH
#define OZSIM_MMA_S8_CUH

__device__ __forceinline__ void mma_s8(int (&c)[4], const uint4& a, unsigned b0, unsigned b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// mma.sync m16n8k16 s8 x s8 -> s32, c += a b: A's rows g, g + 8 at k 4 tq .. 4 tq + 3 (a.x, a.y
// of the m16n8k32 fragment a: its first 16 columns), B's k 4 tq .. 4 tq + 3 of column g
// (crt_gate_slices.cu at d = 3)
__device__ __forceinline__ void mma_s8_k16(int (&c)[4], const uint4& a, unsigned b0)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a.x), "r"(a.y), "r"(b0));
}

#endif  // OZSIM_MMA_S8_CUH
