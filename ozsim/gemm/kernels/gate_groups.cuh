// Amplitude groups of a d-qubit gate (dense_gate.cu, int8_gate.cu, crt_gate.cu). The including
// file defines D (the gate's qubits) and K = 1 << D.
//
// The target qubits sit at bit positions pos[0 .. D-1] of the amplitude index (pos[j] carries
// bit j of the gate's row/column index: Qiskit's little-endian convention). Group g is the K
// amplitudes that share the other bits: its base index is g with a zero bit inserted at each
// target position (ascending), and member c sits at base + sum_j bit_j(c) << pos[j].
#ifndef OZSIM_GATE_GROUPS_CUH
#define OZSIM_GATE_GROUPS_CUH

// the positions, ascending (insertion sort of D <= P values)
template <int P>
__device__ __forceinline__ void sort_positions(const int (&pos)[P], int (&sorted)[D])
{
#pragma unroll
    for (int j = 0; j < D; ++j) sorted[j] = pos[j];
#pragma unroll
    for (int i = 1; i < D; ++i)
#pragma unroll
        for (int j = i; j > 0; --j)
            if (sorted[j] < sorted[j - 1]) { int t = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = t; }
}

__device__ __forceinline__ long long group_base(long long g, const int (&sorted)[D])
{
#pragma unroll
    for (int j = 0; j < D; ++j) {  // insert a zero bit at each target position, lowest first
        const int p = sorted[j];
        g = ((g >> p) << (p + 1)) | (g & ((1LL << p) - 1));
    }
    return g;
}

// The group of this thread of a one-thread-a-group kernel (group = global thread index) and its
// base index; false past the last group
__device__ __forceinline__ bool thread_group(long long groups, const int (&pos)[6],
                                             long long& base)
{
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return false;
    int sorted[D];
    sort_positions(pos, sorted);
    base = group_base(g, sorted);
    return true;
}

template <int P>
__device__ __forceinline__ long long member_offset(int c, const int (&pos)[P])
{
    long long off = 0;
#pragma unroll
    for (int j = 0; j < D; ++j) off += ((c >> j) & 1) ? (1LL << pos[j]) : 0;
    return off;
}

// member offsets (member_offset) for every member, once per block (a table in shared memory)
__device__ __forceinline__ void member_table(long long* moff, const int (&pos)[6])
{
    for (int c = threadIdx.x; c < K; c += blockDim.x) moff[c] = member_offset(c, pos);
}

// The K amplitudes of the group at base into x; false if one is NaN or Inf. mx: the largest
// |Re|, |Im| among them (the column's scale in both Ozaki schemes).
__device__ __forceinline__ bool load_group(const double2* __restrict__ psi, long long base,
                                           const int (&pos)[6], double2 (&x)[K], double& mx)
{
#pragma unroll
    for (int c = 0; c < K; ++c) x[c] = psi[base + member_offset(c, pos)];
    bool finite = true;
    mx = 0.0;
#pragma unroll
    for (int c = 0; c < K; ++c) {
        finite = finite && isfinite(x[c].x) && isfinite(x[c].y);
        mx = fmax(mx, fmax(fabs(x[c].x), fabs(x[c].y)));
    }
    return finite;
}

#endif  // OZSIM_GATE_GROUPS_CUH
