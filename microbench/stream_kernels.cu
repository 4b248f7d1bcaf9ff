// The bandwidth probe's kernels for the CUDA driver (microbench/_stream_cuda.py), no torch, no Triton.
//
// Built into PTX, one module per V and one of helpers, kept as text in microbench/_stream_ptx.py, which the driver
// compiles for the GPU at hand (cuModuleLoadDataEx): `python devscripts/stream_ptx.py` rebuilds it
// with nvcc (PTX ISA lowered to 7.0, so drivers from CUDA 11.0 on load it) and checks it with ptxas
// for every architecture it names. Arrays are fp32 read and written as float4
// (16-byte) vectors; `n4` counts float4s. Each kernel handles V float4s per thread, a block's
// threads V times apart (coalesced), one tile of blockDim.x * V float4s per block.
//
//   stream_read_vV   one partial sum per block (the caller adds them)   1 array read
//   stream_write_vV  a = value                                          1 array written
//   stream_copy_vV   a = b                                              1 read + 1 written
//   stream_triad_vV  a = b + s * c                                      2 read + 1 written
//
// Loads of the read kernel are streaming (ld.global.cs: evict first), as the Triton kernel's.
// stream_init fills b and c with small whole numbers from a hash of the index (exact sums),
// stream_check counts the elements of a that differ from what a method must leave, stream_sum
// adds b exactly (integers), so every figure is checked on the device, outside the timing.

#include <stdint.h>

#define TILE_LOOP(V, ...)                                                                               \
    const unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * (V) + threadIdx.x; \
    _Pragma("unroll") for (int j = 0; j < (V); ++j) {                                                \
        const unsigned long long i = base + (unsigned long long)j * blockDim.x;                      \
        if (i < n4) { __VA_ARGS__; }                                                                    \
    }

template <int V>
__device__ __forceinline__ void read_tile(const float4* __restrict__ x, float* __restrict__ partial,
                                          unsigned long long n4) {
    float acc = 0.0f;
    TILE_LOOP(V, { const float4 v = __ldcs(x + i); acc += (v.x + v.y) + (v.z + v.w); })
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    __shared__ float warp_sums[32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float s = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (threadIdx.x == 0) partial[blockIdx.x] = s;
    }
}

template <int V>
__device__ __forceinline__ void write_tile(float4* __restrict__ a, float value, unsigned long long n4) {
    const float4 v = make_float4(value, value, value, value);
    TILE_LOOP(V, { a[i] = v; })
}

template <int V>
__device__ __forceinline__ void copy_tile(const float4* __restrict__ b, float4* __restrict__ a, unsigned long long n4) {
    TILE_LOOP(V, { a[i] = b[i]; })
}

template <int V>
__device__ __forceinline__ void triad_tile(const float4* __restrict__ b, const float4* __restrict__ c,
                                           float4* __restrict__ a, float s, unsigned long long n4) {
    TILE_LOOP(V, {
        const float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    })
}

#define VARIANTS_(V)                                                                                       \
    extern "C" __global__ void stream_read_v##V(const float4* x, float* partial, unsigned long long n4) {  \
        read_tile<V>(x, partial, n4);                                                                       \
    }                                                                                                       \
    extern "C" __global__ void stream_write_v##V(float4* a, float value, unsigned long long n4) {          \
        write_tile<V>(a, value, n4);                                                                        \
    }                                                                                                       \
    extern "C" __global__ void stream_copy_v##V(const float4* b, float4* a, unsigned long long n4) {       \
        copy_tile<V>(b, a, n4);                                                                             \
    }                                                                                                       \
    extern "C" __global__ void stream_triad_v##V(const float4* b, const float4* c, float4* a, float s,    \
                                                 unsigned long long n4) {                                   \
        triad_tile<V>(b, c, a, s, n4);                                                                      \
    }

// Modules: nvcc -DSTREAM_V=4 builds the four methods at that V, -DSTREAM_HELPERS the helpers
// below; the driver compiles only the modules a probe loads. Neither: everything, in one.
#define VARIANTS(V) VARIANTS_(V)  // V expanded before ## pastes it
#if defined(STREAM_V)
VARIANTS(STREAM_V)
#elif !defined(STREAM_HELPERS)
VARIANTS(1)
VARIANTS(2)
VARIANTS(4)
VARIANTS(8)
#endif

#if !defined(STREAM_V)
__device__ __forceinline__ uint32_t mix(uint64_t i, uint32_t seed) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

// b[i], c[i]: whole numbers 0..15; a[i] = -1 (so a kernel that skips work fails its check).
extern "C" __global__ void stream_init(float* a, float* b, float* c, unsigned long long n, unsigned int seed) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const uint32_t h = mix(i, seed);
        a[i] = -1.0f;
        b[i] = (float)(h & 15u);
        c[i] = (float)((h >> 8) & 15u);
    }
}

// mode 0: a == value (write), 1: a == b (copy), 2: a == b + s * c (triad). counters[0] counts the
// elements that differ, counters[1] holds the first of them (start it at ~0).
extern "C" __global__ void stream_check(const float* a, const float* b, const float* c, unsigned long long n,
                                        int mode, float value, float s, unsigned long long* counters) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const float want = mode == 0 ? value : (mode == 1 ? b[i] : b[i] + s * c[i]);
        if (a[i] != want) {
            atomicAdd(counters, 1ull);
            atomicMin(counters + 1, i);
        }
    }
}

// total[0] += the sum of b's whole numbers, exactly.
extern "C" __global__ void stream_sum(const float* b, unsigned long long n, unsigned long long* total) {
    unsigned long long mine = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        mine += (unsigned long long)b[i];
    for (int offset = 16; offset > 0; offset >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(total, mine);
}
#endif  // !STREAM_V
