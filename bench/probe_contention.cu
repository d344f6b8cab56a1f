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
// P11 adds streams of bulk copies into shared memory (one thread a block keeps kBulkStages copies
// of kBulkBytes in flight: the same 32 KB a block as the load stream's), to tell whether the queue
// a dependent load waits in is the SM's own load path, which bulk copies do not take; each
// stream's rate is printed beside it.
#include "probe_common.cuh"
#include <string>

constexpr int kLines = 4096;        // the chase array: 4096 lines of 128 bytes, 512 KB
constexpr int kHops = 1000;         // hops of one chase
constexpr int kStreamThreads = 256; // a stream block
constexpr int kInFlight = 8;        // 16-byte loads a stream thread issues before it uses them
constexpr int kBulkStages = 4;      // bulk copies a bulk-stream block keeps in flight
constexpr int kBulkBytes = 8192;    // bytes a bulk copy: kBulkStages * kBulkBytes = 32 KB a block

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

// passes over buf (bytes, a multiple of kBulkBytes) by bulk copies into a ring of kBulkStages
// slots of shared memory: thread 0 of each block copies the chunks blockIdx.x, + gridDim.x, ...,
// reusing a slot once its copy has landed; nothing reads the ring. Stamps as k_stream.
__global__ void k_stream_bulk(const char *buf, size_t bytes, int passes, uint64_t *time, int *) {
    extern __shared__ __align__(128) unsigned char ring[]; // [kBulkStages][kBulkBytes]
    __shared__ uint64_t bar[kBulkStages];
    if (blockIdx.x == 0 && threadIdx.x == 0) time[0] = gtime();
    if (threadIdx.x == 0) {
        for (int s = 0; s < kBulkStages; s++) bar_init(&bar[s]);
        const size_t chunks = bytes / kBulkBytes;
        uint32_t k = 0; // copies issued; copy k lands in slot k % kBulkStages, phase k / kBulkStages
        for (int p = 0; p < passes; p++)
            for (size_t c = blockIdx.x; c < chunks; c += gridDim.x, k++) {
                const int s = k % kBulkStages;
                if (k >= kBulkStages) bar_wait(&bar[s], (k / kBulkStages - 1) & 1);
                bar_expect(&bar[s], kBulkBytes);
                bulk_copy(ring + (size_t)s * kBulkBytes, buf + c * kBulkBytes, kBulkBytes, &bar[s]);
            }
        for (uint32_t j = k > kBulkStages ? k - kBulkStages : 0; j < k; j++)
            bar_wait(&bar[j % kBulkStages], (j / kBulkStages) & 1);
        atomicMax((unsigned long long *)&time[1], (unsigned long long)gtime());
    }
}

struct Variant {
    const char *name;
    size_t stream_bytes; // 0: the chase alone
    int blocks_per_sm;
    int passes;
    bool bulk; // the stream by bulk copies (k_stream_bulk), not by loads (k_stream)
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
        {"alone", 0, 0, 0, false},
        {"beside HBM streaming, 1 block an SM", big, 1, 8, false},
        {"beside HBM streaming, 4 blocks an SM", big, 4, 8, false},
        {"beside L2 streaming (16 MB), 4 blocks an SM", small, 4, 1500, false},
        {"beside HBM bulk copies, 1 block an SM", big, 1, 8, true},
        {"beside HBM bulk copies, 4 blocks an SM", big, 4, 8, true},
        {"beside L2 bulk copies (16 MB), 4 blocks an SM", small, 4, 1500, true},
    };
    const size_t bulk_smem = (size_t)kBulkStages * kBulkBytes;
    printf("P9, P11: one dependent load of a 128-byte line written by the kernel before, %d hops a chase,"
           " 7 runs a variant; %d SMs\n\n",
           kHops, sms);
    printf("| chase | beside | ns a hop (median) | over alone | runs inside the stream's window | stream GB/s (median) |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
    for (int w = 0; w < 2; w++) {
        double alone = 0.0;
        for (const Variant &v : variants) {
            std::vector<double> ns, rate;
            int inside = 0;
            for (int r = 0; r < 7; r++) {
                k_write_chase<<<64, 256, 0, s_chase>>>(chase, d_order); // the chase's lines in L2
                CK(cudaStreamSynchronize(s_chase));
                uint64_t ts[2] = {0, 0}, tc[3] = {0, 0, 0};
                if (v.stream_bytes) {
                    CK(cudaMemsetAsync(tstream, 0, 2 * sizeof(uint64_t), s_stream));
                    if (v.bulk)
                        k_stream_bulk<<<sms * v.blocks_per_sm, 32, bulk_smem, s_stream>>>(
                            (const char *)buf, v.stream_bytes, v.passes, tstream, (int *)sink);
                    else
                        k_stream<<<sms * v.blocks_per_sm, kStreamThreads, 0, s_stream>>>(buf, v.stream_bytes / 16,
                                                                                       v.passes, tstream, (int *)sink);
                }
                if (w == 0) k_chase<false><<<1, 32, 0, s_chase>>>(chase, kHops, tchase, sink);
                else k_chase<true><<<1, 32, 0, s_chase>>>(chase, kHops, tchase, sink);
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                CK(cudaMemcpy(tc, tchase, sizeof(tc), cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(ts, tstream, sizeof(ts), cudaMemcpyDeviceToHost));
                ns.push_back((double)tc[0]);
                if (v.stream_bytes && ts[0] <= tc[1] && tc[2] <= ts[1]) inside++;
                if (v.stream_bytes && ts[1] > ts[0]) rate.push_back((double)v.stream_bytes * v.passes / (double)(ts[1] - ts[0]));
            }
            const double m = median(ns);
            if (!v.stream_bytes) alone = m;
            printf("| %s | %s | %.0f | %.2f | %s | %s |\n", w ? "warp" : "thread", v.name, m, alone > 0 ? m / alone : 0.0,
                   v.stream_bytes ? (std::to_string(inside) + " of 7").c_str() : "-",
                   rate.empty() ? "-" : std::to_string((int)median(rate)).c_str());
        }
    }
    return 0;
}
