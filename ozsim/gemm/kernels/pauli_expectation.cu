// Expectation of the Pauli terms that share one X mask (ozsim.observables): one pass over the
// state, no write. For amplitude i: w = conj(psi[i ^ x]) psi[i]; the group's value is
// sum_i w sum_t c_t (-1)**popcount(i & z_t). Each thread walks a grid-stride range, the block
// sums in shared memory, and partial[blockIdx.x] gets the block's sum (the host adds them).

extern "C" __global__ void __launch_bounds__(256)
pauli_group(const double2* __restrict__ psi, long long size, long long x,
            const long long* __restrict__ zs, const double2* __restrict__ cs, int nt,
            double2* __restrict__ partial)
{
    double re = 0.0, im = 0.0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += stride) {
        const double2 a = psi[i], b = psi[i ^ x];
        const double wr = b.x * a.x + b.y * a.y, wi = b.x * a.y - b.y * a.x;  // conj(b) a
        double sr = 0.0, si = 0.0;
        for (int t = 0; t < nt; ++t) {
            const double2 c = cs[t];
            const bool odd = __popcll(i & zs[t]) & 1;
            sr += odd ? -c.x : c.x;
            si += odd ? -c.y : c.y;
        }
        re += wr * sr - wi * si;
        im += wr * si + wi * sr;
    }
    __shared__ double sre[256], sim[256];
    sre[threadIdx.x] = re;
    sim[threadIdx.x] = im;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            sre[threadIdx.x] += sre[threadIdx.x + s];
            sim[threadIdx.x] += sim[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = make_double2(sre[0], sim[0]);
}
