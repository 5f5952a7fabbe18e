// Tile machinery of the tensor-core one-pass gates (int8_gate_mma.cu, crt_gate_mma.cu): a block
// takes NC consecutive amplitude groups (columns of B = the state viewed through the targets),
// TPC threads a column load it and reduce its scale, its INT8 planes (slices or residues) go to
// shared memory as B[plane][column][kk] (kk < K: Re of member kk, else Im of kk - K; the inner
// dimension padded to KD >= 32), and 8 warps multiply them by A's planes with mma.sync m16n8k32
// (s8 x s8 -> s32). A's planes are the real embedding [[Ar, -Ai], [Ai, Ar]] as ready-made A
// fragments (ozsim.gemm._mma_gate.a_fragments), rows ordered so that m tile mt's rows 0..7 are
// the real and rows 8..15 the imaginary rows of members 8 mt .. 8 mt + 7: a thread's accumulator
// fragment holds both parts of 2 output amplitudes. The including file defines D and K.
#ifndef OZSIM_MMA_GATE_CUH
#define OZSIM_MMA_GATE_CUH

#ifndef KD  // (an including file may widen it: crt_gate_mma.cu's byte digits)
#define KD (2 * K < 32 ? 32 : 2 * K)  // the products' inner dimension, padded to the mma's k
#endif
#define KS (KD / 32)                  // k steps
#define W (KD / 4 + 4)                // words per column of a slice (4 x odd: no bank conflict)
#define MT (K / 8)                    // m tiles of 16 rows (8 members, Re and Im)
#ifndef MPT  // (an including file may narrow it: crt_gate_mma.cu at d = 5)
#define MPT (K >= 16 ? K / 4 : 4)     // members per thread in the split
#endif
#define TPC (K / MPT)                 // threads per column
#ifndef THREADS  // (int8_gate_mma.cu's wgmma form may take one warpgroup, 128)
#define THREADS 256
#endif
#define NC (THREADS / TPC)            // columns per tile
#define NT (NC / 8)                   // n tiles of 8 columns
#ifndef WGM  // (an including file may set it: crt_gate_mma.cu at d = 6, all 8 warps along m)
#define WGM (MT < 4 ? MT : 4)         // warps along m
#endif
#define WGN (THREADS / 32 / WGM)      // warps along n
#define WMT (MT / WGM)                // m tiles per warp
#define WNT (NT / WGN)                // n tiles per warp
#define A_STRIDE (MT * KS * 32)        // A fragments (uint4) per plane
#define NOT_FINITE (-0x7fffffff)
#include "gate_groups.cuh"
#include "group_sync.cuh"
#include "exact_int.cuh"
#include "mma_s8.cuh"

// four 8x8 b16 matrices from shared memory: exactly the m16n8k32 s8 B fragments (b0, b1) of two
// n tiles when each matrix row is 16 bytes of one column of B (PTX ISA, ldmatrix)
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned& r0, unsigned& r1,
                                            unsigned& r2, unsigned& r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}


#ifndef FETCH_MEMBER  // member i of a thread (sq: its place among the column's TPC threads): its
#define FETCH_MEMBER(sq, i) ((sq) * MPT + (i))  // MPT consecutive members (an including file may
#endif                                           // interleave them: crt_gate_mma.cu, TC_SPLIT)

// The thread's MPT members of column gc of the tile (sq: its place among the column's TPC
// threads; absent columns past the last group read as zeros): the loads only, so that a tile's
// loads can be issued before the previous tile's products (PREFETCH).
__device__ __forceinline__ void fetch(const double2* __restrict__ psi, long long gc, long long groups,
                                      const int (&sorted)[D], int sq, const long long* moff,
                                      double2 (&x)[MPT], long long& base)
{
    const bool live = gc < groups;
    base = live ? group_base(gc, sorted) : -1;
#pragma unroll
    for (int i = 0; i < MPT; ++i)
        x[i] = live ? psi[base + moff[FETCH_MEMBER(sq, i)]] : make_double2(0.0, 0.0);
}

// The column's exponent e (frexp of its largest |Re|, |Im|; 0 for a zero column) and whether
// all its K amplitudes are finite, reduced over the column's TPC threads (adjacent lanes).
__device__ __forceinline__ void column_scale(const double2 (&x)[MPT], int& e, bool& finite)
{
    double mx = 0.0;
    int fin = 1;
#pragma unroll
    for (int i = 0; i < MPT; ++i) {
        fin &= isfinite(x[i].x) && isfinite(x[i].y);
        mx = fmax(mx, fmax(fabs(x[i].x), fabs(x[i].y)));
    }
#pragma unroll
    for (int o = 1; o < TPC; o <<= 1) {
        mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        fin &= __shfl_xor_sync(0xffffffffu, fin, o);
    }
    finite = fin;
    frexp(mx, &e);
}

// The lane's row address of ldmatrix.x4 in plane 0 of B (shared memory at b) for warp column wn:
// matrix lane / 8 is n tile lane / 16 of the warp's, k half (lane / 8) % 2 of the fragment; row
// lane % 8 (a column of B)
__device__ __forceinline__ unsigned ldmatrix_lane(const unsigned* b, int wn, int lane)
{
    return (unsigned)__cvta_generic_to_shared(b) +
        (unsigned)((((wn * WNT + (lane >> 4)) * 8 + (lane & 7)) * W) * 4 + ((lane >> 3) & 1) * 16);
}

// Where accumulator entry [mi][ni][v] of warp (wm, wn), lane (g, tq) goes: rows g (v = 0, 1:
// Re) and g + 8 (v = 2, 3: Im) of m tile wm WMT + mi are member out_member; entries v and v + 2
// are column out_column(.., h = v % 2) of the tile
__device__ __forceinline__ int out_member(int wm, int mi, int g) { return 8 * (wm * WMT + mi) + g; }
__device__ __forceinline__ int out_column(int wn, int ni, int tq, int h)
{
    return (wn * WNT + ni) * 8 + 2 * tq + h;
}

#endif  // OZSIM_MMA_GATE_CUH
