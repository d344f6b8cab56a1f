// probe_contention.cu - issue 48's P9: what one dependent round trip to L2 costs a kernel of the
// M=1 chain while the products ahead of it stream their weights on the same SMs.
//
// A chase kernel (one block of 32 threads) follows a random cycle through a 512 KB array that a
// kernel before it wrote (L2-resident, as the chain's activations are): each hop is one
// dependent load of a 128-byte line, by lane 0 alone ("thread") or by the whole warp, lane l
// loading word l of the line and lane 0's word naming the next ("warp", as a body loads its
// activations). It runs alone, then beside a stream kernel on another stream: blocks of 256
// threads, each keeping 8 16-byte loads a thread in flight, as the products' weight loads run
// ahead of their wait, over a 1 GiB buffer (HBM) or a 16 MB one (L2 hits), at 1 or 4 blocks an SM.
// A variant counts only when the chase ran inside the stream kernel's window, which both kernels'
// %globaltimer stamps show. Each variant runs 7 times: the median ns a hop, and its ratio to alone.
#include "probe_common.cuh"
#include <string>

constexpr int kLines = 4096;        // the chase array: 4096 lines of 128 bytes, 512 KB
constexpr int kHops = 1000;         // hops of one chase
constexpr int kStreamThreads = 256; // a stream block
constexpr int kInFlight = 8;        // 16-byte loads a stream thread issues before it uses them

// next[line * 32 + 0] names the line after it; the other 31 words are filler
__global__ void k_write_chase(uint32_t *chase, const uint32_t *order) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kLines * 32; i += gridDim.x * blockDim.x) {
        const int line = i / 32, word = i % 32;
        chase[i] = word == 0 ? order[line] : (uint32_t)i;
    }
}

// ns a hop (time[0]) and the chase's start and end (time[1], time[2])
template <bool warp>
__global__ void k_chase(const uint32_t *chase, int hops, uint64_t *time, uint32_t *sink) {
    const int lane = threadIdx.x & 31;
    uint32_t line = 0, acc = 0;
    const uint64_t ready = gtime() + 20000; // 20 us for the stream kernel's blocks to be running
    while (gtime() < ready) {
    }
    const uint64_t t0 = gtime();
    for (int h = 0; h < hops; h++) {
        if (warp) {
            const uint32_t v = __ldcg(&chase[line * 32 + lane]);
            acc += v;
            line = __shfl_sync(0xffffffffu, v, 0);
        } else if (lane == 0) {
            line = __ldcg(&chase[line * 32]);
        }
    }
    const uint64_t t1 = gtime();
    if (lane == 0) {
        time[0] = (t1 - t0) / (uint64_t)hops;
        time[1] = t0;
        time[2] = t1;
    }
    if (acc + line == 0xffffffffu) sink[0] = acc; // keeps the loads
}

// passes over buf (n16 16-byte words), kInFlight loads a thread in flight; block 0 stamps the start
// (time[0]) and the last block to finish the end (time[1], by atomicMax)
__global__ void k_stream(const int4 *buf, size_t n16, int passes, uint64_t *time, int *sink) {
    if (blockIdx.x == 0 && threadIdx.x == 0) time[0] = gtime();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    int acc = 0;
    for (int p = 0; p < passes; p++)
        for (size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < n16; i0 += stride * kInFlight) {
            int4 v[kInFlight];
#pragma unroll
            for (int u = 0; u < kInFlight; u++) {
                const size_t i = i0 + u * stride;
                v[u] = i < n16 ? __ldcg(&buf[i]) : make_int4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < kInFlight; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax((unsigned long long *)&time[1], (unsigned long long)gtime());
    if (acc == 0x7fffffff) sink[0] = acc;
}

struct Variant {
    const char *name;
    size_t stream_bytes; // 0: the chase alone
    int blocks_per_sm;
    int passes;
};

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    // a random cycle through the lines, fixed seed
    std::vector<uint32_t> perm(kLines), order(kLines);
    for (int i = 0; i < kLines; i++) perm[i] = i;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = kLines - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(perm[i], perm[(seed >> 33) % (uint64_t)(i + 1)]);
    }
    for (int i = 0; i < kLines; i++) order[perm[i]] = perm[(i + 1) % kLines];
    uint32_t *chase, *d_order, *sink;
    uint64_t *tchase, *tstream;
    int4 *buf;
    const size_t big = (size_t)1 << 30, small = (size_t)16 << 20;
    CK(cudaMalloc(&chase, kLines * 128));
    CK(cudaMalloc(&d_order, kLines * 4));
    CK(cudaMalloc(&sink, 64));
    CK(cudaMalloc(&tchase, 3 * sizeof(uint64_t)));
    CK(cudaMalloc(&tstream, 2 * sizeof(uint64_t)));
    CK(cudaMalloc(&buf, big));
    CK(cudaMemset(buf, 1, big));
    CK(cudaMemcpy(d_order, order.data(), kLines * 4, cudaMemcpyHostToDevice));
    cudaStream_t s_chase, s_stream;
    CK(cudaStreamCreateWithFlags(&s_chase, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s_stream, cudaStreamNonBlocking));

    const Variant variants[] = {
        {"alone", 0, 0, 0},
        {"beside HBM streaming, 1 block an SM", big, 1, 8},
        {"beside HBM streaming, 4 blocks an SM", big, 4, 8},
        {"beside L2 streaming (16 MB), 4 blocks an SM", small, 4, 1500},
    };
    printf("P9: one dependent load of a 128-byte line written by the kernel before, %d hops a chase,"
           " 7 runs a variant; %d SMs\n\n",
           kHops, sms);
    printf("| chase | beside | ns a hop (median) | over alone | runs inside the stream's window |\n");
    printf("| --- | --- | ---: | ---: | ---: |\n");
    for (int w = 0; w < 2; w++) {
        double alone = 0.0;
        for (const Variant &v : variants) {
            std::vector<double> ns;
            int inside = 0;
            for (int r = 0; r < 7; r++) {
                k_write_chase<<<64, 256, 0, s_chase>>>(chase, d_order); // the chase's lines in L2
                CK(cudaStreamSynchronize(s_chase));
                uint64_t ts[2] = {0, 0}, tc[3] = {0, 0, 0};
                if (v.stream_bytes) {
                    CK(cudaMemsetAsync(tstream, 0, 2 * sizeof(uint64_t), s_stream));
                    k_stream<<<sms * v.blocks_per_sm, kStreamThreads, 0, s_stream>>>(buf, v.stream_bytes / 16, v.passes,
                                                                                   tstream, (int *)sink);
                }
                if (w == 0) k_chase<false><<<1, 32, 0, s_chase>>>(chase, kHops, tchase, sink);
                else k_chase<true><<<1, 32, 0, s_chase>>>(chase, kHops, tchase, sink);
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                CK(cudaMemcpy(tc, tchase, sizeof(tc), cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(ts, tstream, sizeof(ts), cudaMemcpyDeviceToHost));
                ns.push_back((double)tc[0]);
                if (v.stream_bytes && ts[0] <= tc[1] && tc[2] <= ts[1]) inside++;
            }
            const double m = median(ns);
            if (!v.stream_bytes) alone = m;
            printf("| %s | %s | %.0f | %.2f | %s |\n", w ? "warp" : "thread", v.name, m, alone > 0 ? m / alone : 0.0,
                   v.stream_bytes ? (std::to_string(inside) + " of 7").c_str() : "-");
        }
    }
    return 0;
}
