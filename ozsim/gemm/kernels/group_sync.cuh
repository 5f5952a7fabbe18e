// The barrier of a tile's phases in the one-pass tensor-core gates (int8_gate_mma.cu,
// crt_gate_mma.cu through mma_gate.cuh, dense_gate_mma.cu): between a tile's load or split and
// its products, and between its products and the next tile's. The including file defines
// THREADS (a block's threads, 8 or 4 warps) and WGM (warps along m), and lays the warps out so
// that the warps that load a tile's columns are the warps that multiply them: warp w loads
// columns [32 w, 32 w + 32) / TPC (TPC threads a column), and the WGM warps WGM wn .. WGM wn +
// WGM - 1 multiply columns [8 WNT wn, 8 WNT (wn + 1)), the same set, since 8 WNT = 32 WGM / TPC
// (WNT n tiles of 8 columns a warp). So the barrier needs only that group (a warp where WGM = 1,
// a named barrier of WGM warps otherwise): the groups of a block run their phases independently,
// one loading or splitting while another multiplies, instead of in lock step. What the groups
// share (A's planes, the member table) is written before the block's first __syncthreads.
// H200, N = 30 (benchmarks/RESULTS.md): scheme I's 3-qubit gates 2.04 -> 1.73x the copy floor,
// 4-qubit 2.08 -> 1.83x, 6-qubit (wgmma, two warpgroups) 4.46 -> 4.14x; zgemm's 6-qubit gate
// 1.77 -> 1.62x; scheme II's 3-qubit gate 5.08 -> 4.89x, its 6-qubit gate (two groups of 8
// warps) 6.12-6.66x -> 5.87-6.22x (crt_gate_mma.cu). -DGROUP_SYNC=0: every barrier block-wide.
#ifndef OZSIM_GROUP_SYNC_CUH
#define OZSIM_GROUP_SYNC_CUH

#ifndef GROUP_SYNC
#define GROUP_SYNC 1
#endif
static_assert(8 * WNT * TPC == 32 * WGM && WGM * 32 <= THREADS && THREADS % (WGM * 32) == 0,
              "group_sync: the warps that load a tile's columns must multiply them");

__device__ __forceinline__ void group_sync()
{
#if !GROUP_SYNC || WGM * 32 >= THREADS
    __syncthreads();
#elif WGM == 1
    __syncwarp();
#else
    asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)(threadIdx.x >> 5) / WGM), "n"(WGM * 32)
                 : "memory");
#endif
}

#endif  // OZSIM_GROUP_SYNC_CUH
