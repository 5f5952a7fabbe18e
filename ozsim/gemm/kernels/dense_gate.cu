// One-pass dense gate in FP64 on CUDA cores: psi <- U psi on d target qubits, in place.
//
// The state psi holds 2**n complex128 amplitudes. The d target qubits sit at bit positions
// pos_0 .. pos_{d-1} of the amplitude index (pos_j carries bit j of the gate's row/column
// index: Qiskit's little-endian convention). An amplitude group is the 2**d amplitudes that
// share the other n - d bits; group g's base index is g with a zero bit inserted at each target
// position (ascending), and member c sits at base + sum_j bit_j(c) << pos_j.
//
// SPLIT (1 or 2) threads take one group; each loads its 2**d / SPLIT members into registers,
// forms its part of every output row (FP64 fused multiply-adds over its members in order),
// the parts meet by a warp shuffle, and the thread owning row r writes it back over the input.
// Groups are disjoint, so the update is in place and the state crosses HBM once in and once
// out. The gate sits in constant memory: the threads of a warp read the same U[r][c] at the same
// time (a broadcast), and where the loops unroll its address is an immediate.
//
// Consecutive threads take consecutive groups: where no target is among the lowest bits a warp's
// loads are contiguous; where one is, the loads of members c and c ^ 1 touch the same sectors
// and meet in L1/L2, so DRAM still sees each sector once.
//
// Targets on the lowest address bits (dense_gate_low): a warp's loads of member c then stride by
// K amplitudes (all targets below bit 5) or by 2 (bit 0 a target), and measured on an H200 the
// kernel above takes 1.4x (d = 1, 2) to 2.1x (d = 3) the copy floor in FP64 and up to 7.9x in
// FP32 (1.03-1.06x with the targets on high bits). dense_gate_low stages the block's amplitudes
// through shared memory instead: the 256 groups of a block cover 2**(8+d) amplitudes that form
// 2**(3+d) aligned segments of 32 (the group index's low bits fill the non-target bits below 5),
// each loaded and stored by one warp instruction of 32 consecutive amplitudes; in between, each
// thread applies the gate to its group from shared memory. Needs groups % 256 == 0 and
// 2**(8+d) amplitudes of shared memory (d <= 3 in FP64, d <= 4 in FP32: 36 KiB with the pad).
//
// Compiled once per d: GATE_QUBITS = 1..6 (SPLIT = 2 at d = 6 keeps 64 values a thread), and
// per precision: SINGLE=1 takes complex64 amplitudes and gate (FP32 fused multiply-adds; the
// single-precision backends' one-pass kernel), else complex128.

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined (1..6)"
#endif
#define D GATE_QUBITS
#define K (1 << D)
#define SPLIT (D >= 6 ? 2 : 1)
#define KH (K / SPLIT)

#if SINGLE
typedef float real;
typedef float2 complex_t;
#else
typedef double real;
typedef double2 complex_t;
#endif

__constant__ complex_t gate_u[K * K];  // row-major U, little-endian over the targets
#include "gate_groups.cuh"

extern "C" __global__ void __launch_bounds__(256)
dense_gate(complex_t* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
           int p5)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // target positions, bit j of the gate index
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long g = tid / SPLIT;
    const int part = (int)(tid % SPLIT);
    const bool active = g < groups;  // SPLIT lanes of a group are all active or all not
    int sorted[D];
    sort_positions(pos, sorted);
    const long long base = group_base(active ? g : 0, sorted);
    complex_t x[KH];
#pragma unroll
    for (int i = 0; i < KH; ++i)
        x[i] = active ? psi[base + member_offset(part * KH + i, pos)] : complex_t{0, 0};
#pragma unroll 1
    for (int r = 0; r < K; ++r) {
        const complex_t* u = gate_u + r * K + part * KH;
        real re = 0, im = 0;
#pragma unroll
        for (int i = 0; i < KH; ++i) {
            const complex_t w = u[i];
            re = fma(w.x, x[i].x, re);
            re = fma(-w.y, x[i].y, re);
            im = fma(w.x, x[i].y, im);
            im = fma(w.y, x[i].x, im);
        }
#if SPLIT == 2
        re += __shfl_xor_sync(0xffffffffu, re, 1);
        im += __shfl_xor_sync(0xffffffffu, im, 1);
#endif
        if (active && r / KH == part) psi[base + member_offset(r, pos)] = complex_t{re, im};
    }
}

#if D <= 3 || (SINGLE && D <= 4)
// Segment seg of block b (module comment): tq = seg >> nhigh selects the block's groups
// 32 >> nlow apart (the non-target bits below 5 zero), ch = seg & ((1 << nhigh) - 1) the values
// of the targets at bits >= 5 (in gate-index order); its first amplitude's address.
__device__ __forceinline__ long long segment_address(long long g0, int seg, int nlow, int nhigh,
                                                     const int (&pos)[6], const int (&sorted)[D])
{
    const int tq = seg >> nhigh, ch = seg & ((1 << nhigh) - 1);
    int c = 0, k = 0;
#pragma unroll
    for (int j = 0; j < D; ++j)
        if (pos[j] >= 5) c |= ((ch >> k++) & 1) << j;
    return group_base(g0 + ((long long)tq << (5 - nlow)), sorted) + member_offset(c, pos);
}

__device__ __forceinline__ int padded(int i) { return i + (i >> D); }

extern "C" __global__ void __launch_bounds__(256)
dense_gate_low(complex_t* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3,
               int p4, int p5)
{
    // 2**(3+D) segments of 32 amplitudes, one pad slot after every K (element i at i + i / K):
    // with the targets on the lowest bits thread t reads elements t K .. t K + K - 1, and the
    // pad turns that stride of K into K + 1 (no bank conflicts)
    __shared__ complex_t tile[256 * K + 256];
    const int pos[6] = {p0, p1, p2, p3, p4, p5};
    int sorted[D];
    sort_positions(pos, sorted);
    int nlow = 0;
#pragma unroll
    for (int j = 0; j < D; ++j) nlow += pos[j] < 5;
    const int nhigh = D - nlow, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long g0 = (long long)blockIdx.x * 256;
    for (int seg = warp; seg < 8 * K; seg += 8)  // coalesced: 32 consecutive amplitudes
        tile[padded(seg * 32 + lane)] =
            psi[segment_address(g0, seg, nlow, nhigh, pos, sorted) + lane];
    __syncthreads();
    // thread t's group: its members' places in the tile
    const int t = threadIdx.x, tq = t >> (5 - nlow);
    const long long base = group_base(g0 + t, sorted);
    int at[K];
    complex_t x[K];
#pragma unroll
    for (int c = 0; c < K; ++c) {
        int ch = 0, k = 0;
#pragma unroll
        for (int j = 0; j < D; ++j)
            if (pos[j] >= 5) ch |= ((c >> j) & 1) << k++;
        at[c] = padded(((tq << nhigh) | ch) * 32 + (int)((base + member_offset(c, pos)) & 31));
        x[c] = tile[at[c]];
    }
#pragma unroll 1
    for (int r = 0; r < K; ++r) {  // (the same sums, in the same order, as dense_gate)
        const complex_t* u = gate_u + r * K;
        real re = 0, im = 0;
#pragma unroll
        for (int i = 0; i < K; ++i) {
            const complex_t w = u[i];
            re = fma(w.x, x[i].x, re);
            re = fma(-w.y, x[i].y, re);
            im = fma(w.x, x[i].y, im);
            im = fma(w.y, x[i].x, im);
        }
        tile[at[r]] = complex_t{re, im};  // (only this thread reads or writes its group)
    }
    __syncthreads();
    for (int seg = warp; seg < 8 * K; seg += 8)
        psi[segment_address(g0, seg, nlow, nhigh, pos, sorted) + lane] =
            tile[padded(seg * 32 + lane)];
}
#endif
