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
