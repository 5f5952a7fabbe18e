// Scheme II, stage "analyse" (ozsim.gemm.ozaki2.cuda.analyse_launch): the norm exponents f of
// the rows and a NaN/Inf flag; the segmented passes crt_scan, crt_sumsq, crt_fin and the
// one-kernel crt_analyse_tile_* (k <= 8192). Options: those of crt_common.cuh.
#include "crt_common.cuh"

// The two analysis passes (ozaki2.analyse_rows) over X (rows, k) complex128, element strides
// (sr, sc), or (roff != 0) through offset tables: X[r, kk] = x[roff[r] + koff[kk]] (a gathered
// matrix: the state read through the next gate's permutation of qubit axes, no copy; sr and sc
// then only describe which index is adjacent in memory), blocks of 256 threads, k split in
// segments of `seg` (blockIdx.y). rowfast != 0 (rows adjacent in memory: B's columns): lane =
// row of a 32-row tile (blockIdx.x), warp w walks
// k = k0 + w, k0 + w + 8, ...; else (rows contiguous along k) warp w takes row 8 blockIdx.x + w
// and its lanes walk k with stride 32. Partials meet per row in shared memory and reach the
// row's global value with one atomic per row and block: every combined quantity is an integer
// (max, count, exact sum), so the order does not matter.
struct Geom {
    long long r, k0, k1, ks;
    int slot;  // this thread's slot in the block's [8][32] table
};

__device__ __forceinline__ Geom crt_geom(int rowfast, long long k, long long seg)
{
    Geom g;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const long long kb = (long long)blockIdx.y * seg;
    g.k1 = kb + seg < k ? kb + seg : k;
    if (rowfast) { g.r = (long long)blockIdx.x * 32 + lane; g.k0 = kb + w; g.ks = 8; }
    else { g.r = (long long)blockIdx.x * 8 + w; g.k0 = kb + lane; g.ks = 32; }
    g.slot = threadIdx.x;
    return g;
}

// row (within the block) and number of parts of the combining thread t
__device__ __forceinline__ int crt_slot(int rowfast, int t, int part)
{
    return rowfast ? part * 32 + t : t * 32 + part;
}

// The block's per-thread partial sums s_s[slot] of each of its rows, added into sq[r] with one
// atomic per row and block (integers: any order). T = double (exact integers below 2**53) or
// unsigned long long.
template <typename T>
__device__ __forceinline__ void crt_add_row_sums(const T* s_s, int rowfast, long long rows,
                                                 unsigned long long* __restrict__ sq)
{
    const int nrb = rowfast ? 32 : 8, nparts = rowfast ? 8 : 32;
    const int t = threadIdx.x;
    const long long r = (long long)blockIdx.x * nrb + t;
    if (t < nrb && r < rows) {
        T tot = 0;
        for (int q = 0; q < nparts; ++q) tot += s_s[crt_slot(rowfast, t, q)];
        if (tot > 0) atomicAdd(&sq[r], (unsigned long long)tot);
    }
}

// Pass 1: per row the largest frexp exponent of its scalars (emax, atomicMax, initialised to
// INT_MIN: the ozIMMU exponent e, 0 for a zero row after crt_fin); *flag = 1 on NaN/Inf.
extern "C" __global__ void crt_scan(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    long long seg, int rowfast, int* __restrict__ emax, unsigned long long* __restrict__ flag)
{
    __shared__ int s_e[256];
    const Geom g = crt_geom(rowfast, k, seg);
    int em = EMIN_, bad = 0;
    if (g.r < rows) {
        const double2* p = x + (roff ? roff[g.r] : g.r * sr);
        for (long long kk = g.k0; kk < g.k1; kk += g.ks) {
            const double2 v = p[roff ? koff[kk] : kk * sc];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            int ex, ey;
            frexp(v.x, &ex);
            frexp(v.y, &ey);
            if (v.x != 0.0) em = max(em, ex);
            if (v.y != 0.0) em = max(em, ey);
        }
    }
    s_e[g.slot] = em;
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1ull;
    const int nrb = rowfast ? 32 : 8, nparts = rowfast ? 8 : 32;
    const int t = threadIdx.x;
    const long long r = (long long)blockIdx.x * nrb + t;
    if (t < nrb && r < rows) {
        int e = EMIN_;
        for (int q = 0; q < nparts; ++q) e = max(e, s_e[crt_slot(rowfast, t, q)]);
        if (e != EMIN_) atomicMax(&emax[r], e);
    }
}

// Pass 2: S = sum ceil(|x| 2**(NFRAC - e))**2 per row (integers < 2**53: exact in any order),
// added into sq[r] (uint64).
extern "C" __global__ void crt_sumsq(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    long long seg, int rowfast, const int* __restrict__ emax, unsigned long long* __restrict__ sq)
{
    __shared__ double s_s[256];
    const Geom g = crt_geom(rowfast, k, seg);
    double s = 0.0;
    if (g.r < rows && emax[g.r] != EMIN_) {
        const double2* p = x + (roff ? roff[g.r] : g.r * sr);
        const int sh = NFRAC - emax[g.r];
        const bool fast = sh <= 1023;  // e >= -1010: 2**sh normal (sh >= 13 - 1024 always)
        const double scale = fast ? pow2(sh) : 0.0;
        for (long long kk = g.k0; kk < g.k1; kk += g.ks) {
            const double2 v = p[roff ? koff[kk] : kk * sc];
            const double qa = ceil(fast ? fabs(v.x) * scale : ldexp(fabs(v.x), sh));
            const double qb = ceil(fast ? fabs(v.y) * scale : ldexp(fabs(v.y), sh));
            s += qa * qa;
            s += qb * qb;
        }
    }
    s_s[g.slot] = s;
    __syncthreads();
    crt_add_row_sums(s_s, rowfast, rows, sq);
}

// int8-crt-auto's statistics of A (ozaki2.bound_stats; ozaki2.cuda.bound_stats_parts), run on
// X = A.T after crt_scan has found each row's e (a column of A): S = sum floor(|x| 2**(frac - e))**2
// per row, added into sq[r] in INT64 (exact, any order). |x| 2**(frac - e) < 2**frac: below 1 the
// floor is 0 whatever ldexp rounds, above it ldexp is exact, so S equals the CPU's integers.
extern "C" __global__ void crt_col_sumsq(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    long long seg, int rowfast, const int* __restrict__ emax, int frac,
    unsigned long long* __restrict__ sq)
{
    __shared__ unsigned long long s_s[256];
    const Geom g = crt_geom(rowfast, k, seg);
    unsigned long long s = 0ull;
    if (g.r < rows && emax[g.r] != EMIN_) {
        const double2* p = x + (roff ? roff[g.r] : g.r * sr);
        const int sh = frac - emax[g.r];
        for (long long kk = g.k0; kk < g.k1; kk += g.ks) {
            const double2 v = p[roff ? koff[kk] : kk * sc];
            const long long qa = (long long)floor(ldexp(fabs(v.x), sh));
            const long long qb = (long long)floor(ldexp(fabs(v.y), sh));
            s += (unsigned long long)(qa * qa + qb * qb);
        }
    }
    s_s[g.slot] = s;
    __syncthreads();
    crt_add_row_sums(s_s, rowfast, rows, sq);
}

// Per row: f = e - NFRAC + ceil(bitlength(S) / 2) (0 for a zero row) into f.
extern "C" __global__ void crt_fin(
    long long rows, const int* __restrict__ emax, const unsigned long long* __restrict__ sq,
    int* __restrict__ f)
{
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (long long)gridDim.x * blockDim.x) {
        const int e = emax[r] == EMIN_ ? 0 : emax[r];
        const double s = (double)sq[r];  // exact: < 2**53
        int fr = 0;
        if (s > 0.0) {
            int bl;
            frexp(s, &bl);
            fr = e - NFRAC + (bl + 1) / 2;
        }
        f[r] = fr;
    }
}

// The whole analysis in one kernel where k <= 8 TPR (the state-vector gates up to 13 qubits,
// squares up to 8192): a block of THREADS takes RPB = THREADS / TPR rows with all of k (TPR =
// 8 .. 1024 threads per row, the fewest that hold k at AT_VPT = 8 values per thread; 256
// threads in 4 blocks per multiprocessor up to TPR = 128, then 2 rows a block, 1 at 1024),
// each thread keeping its values in registers, so that X is read once instead of twice and
// crt_fin's launch and the per-row atomics go. Thread t: rowfast (rows adjacent in memory)
// row t % RPB, k = t / RPB + TPR j; else row t / TPR, k = t % TPR + TPR j (contiguous along
// k). The same integers as crt_scan + crt_sumsq + crt_fin: max, counts and sums of integers
// below 2**53, so the order of the reductions does not matter.
#define AT_VPT 8
template <int TPR, int THREADS>
__device__ __forceinline__ int at_slot(int rowfast, int rl, int kt)
{
    return rowfast ? kt * (THREADS / TPR) + rl : rl * TPR + kt;
}

template <bool TAB, int TPR, int THREADS>
__device__ __forceinline__ void crt_analyse_tile_body(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff, int rowfast,
    int* __restrict__ f, unsigned long long* __restrict__ flag)
{
    constexpr int RPB = THREADS / TPR;
    __shared__ int s_e[THREADS];
    __shared__ double s_s[THREADS];
    __shared__ int s_row[RPB];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const int rl = rowfast ? t % RPB : t / TPR;
    const int kt = rowfast ? t / RPB : t % TPR;
    const long long r = (long long)blockIdx.x * RPB + rl;
    const bool valid = r < rows;
    const double2* p = x + (valid ? (TAB ? roff[r] : r * sr) : 0);
    double2 v[AT_VPT];
#pragma unroll
    for (int j = 0; j < AT_VPT; ++j) {
        const long long kk = kt + (long long)TPR * j;
        v[j] = (valid && kk < k) ? p[TAB ? koff[kk] : kk * sc] : make_double2(0.0, 0.0);
    }
    // pass 1: e, NaN/Inf
    int em = EMIN_, bad = 0;
#pragma unroll
    for (int j = 0; j < AT_VPT; ++j) {
        bad |= !(fabs(v[j].x) <= DMAX) | !(fabs(v[j].y) <= DMAX);
        int ex, ey;
        frexp(v[j].x, &ex);
        frexp(v[j].y, &ey);
        if (v[j].x != 0.0) em = max(em, ex);
        if (v[j].y != 0.0) em = max(em, ey);
    }
    s_e[t] = em;
    const int anybad = __syncthreads_or(bad);
    if (anybad && t == 0) *flag = 1ull;
    for (int row = w; row < RPB; row += THREADS / 32) {  // warp w: rows w, w + THREADS / 32..
        int e = EMIN_;
        for (int i = lane; i < TPR; i += 32)
            e = max(e, s_e[at_slot<TPR, THREADS>(rowfast, row, i)]);
        for (int o = 16; o > 0; o >>= 1) e = max(e, __shfl_xor_sync(0xffffffffu, e, o));
        if (lane == 0) s_row[row] = e;
    }
    __syncthreads();
    // pass 2: S = sum ceil(|x| 2**(NFRAC - e))**2, from the registers
    const int erow = s_row[rl];
    double s = 0.0;
    if (valid && erow != EMIN_) {
        const int sh = NFRAC - erow;
        const bool fast = sh <= 1023;  // as crt_sumsq
        const double scale = fast ? pow2(sh) : 0.0;
#pragma unroll
        for (int j = 0; j < AT_VPT; ++j) {  // zeros (k padding) add nothing
            const double qa = ceil(fast ? fabs(v[j].x) * scale : ldexp(fabs(v[j].x), sh));
            const double qb = ceil(fast ? fabs(v[j].y) * scale : ldexp(fabs(v[j].y), sh));
            s += qa * qa;
            s += qb * qb;
        }
    }
    s_s[t] = s;
    __syncthreads();
    for (int row = w; row < RPB; row += THREADS / 32) {  // crt_fin of the row
        double tot = 0.0;
        for (int i = lane; i < TPR; i += 32) tot += s_s[at_slot<TPR, THREADS>(rowfast, row, i)];
        for (int o = 16; o > 0; o >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, o);
        const long long rr = (long long)blockIdx.x * RPB + row;
        if (rr < rows && lane == 0) {
            const int e = s_row[row] == EMIN_ ? 0 : s_row[row];
            int fr = 0;
            if (tot > 0.0) {
                int bl;
                frexp(tot, &bl);
                fr = e - NFRAC + (bl + 1) / 2;
            }
            f[rr] = fr;
        }
    }
}
#define AT_KERNEL(TAB, TPR, THREADS, MINB, NAME)                                              \
    extern "C" __global__ void __launch_bounds__(THREADS, MINB) NAME(                        \
        const double2* __restrict__ x, long long rows, long long k, long long sr,           \
        long long sc, const long long* __restrict__ roff, const long long* __restrict__ koff, \
        int rowfast, int* __restrict__ f, unsigned long long* __restrict__ flag)            \
    {                                                                                        \
        crt_analyse_tile_body<TAB, TPR, THREADS>(x, rows, k, sr, sc, roff, koff, rowfast, f, \
                                                 flag);                                      \
    }

// The instances crt_analyse_tile_<TPR>[_tab] (_tab: X through offset tables), one per threads
// per row TPR = 8 .. 1024, launched with THREADS = 256 up to TPR = 128, else 2 TPR (at most 1024:
// ozaki2.cuda._tile_threads), each with as many blocks per multiprocessor (MINB) as 64 registers
// a thread allow (65536 / 64 / THREADS).
AT_KERNEL(false, 8, 256, 4, crt_analyse_tile_8)
AT_KERNEL(false, 16, 256, 4, crt_analyse_tile_16)
AT_KERNEL(false, 32, 256, 4, crt_analyse_tile_32)
AT_KERNEL(false, 64, 256, 4, crt_analyse_tile_64)
AT_KERNEL(false, 128, 256, 4, crt_analyse_tile_128)
AT_KERNEL(false, 256, 512, 2, crt_analyse_tile_256)
AT_KERNEL(false, 512, 1024, 1, crt_analyse_tile_512)
AT_KERNEL(false, 1024, 1024, 1, crt_analyse_tile_1024)
AT_KERNEL(true, 8, 256, 4, crt_analyse_tile_8_tab)
AT_KERNEL(true, 16, 256, 4, crt_analyse_tile_16_tab)
AT_KERNEL(true, 32, 256, 4, crt_analyse_tile_32_tab)
AT_KERNEL(true, 64, 256, 4, crt_analyse_tile_64_tab)
AT_KERNEL(true, 128, 256, 4, crt_analyse_tile_128_tab)
AT_KERNEL(true, 256, 512, 2, crt_analyse_tile_256_tab)
AT_KERNEL(true, 512, 1024, 1, crt_analyse_tile_512_tab)
AT_KERNEL(true, 1024, 1024, 1, crt_analyse_tile_1024_tab)
