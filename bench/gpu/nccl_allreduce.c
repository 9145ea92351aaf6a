// nccl_allreduce: the baseline that syncgen's GPU backend is measured
// against. One process drives every visible GPU (as nccl-tests' -g does),
// calls ncclAllReduce in place directly on a stream, for sizes from 4 B to
// 1 GiB (doubling), and prints per-call time, algbw and busbw in the same
// format as the runtime's benchmark (runtime/gpu_bench_test.go), so that
// scripts/gpu-check.sh can put them side by side.
//
// Build on the GPU machine (bench/gpu/run.sh does it):
//   gcc -O2 -o nccl_allreduce nccl_allreduce.c -I$CUDA/include -I$NCCL/include \
//       -L$CUDA/lib64 -L$NCCL/lib -lnccl -lcudart
//
// Usage: nccl_allreduce [max_bytes] [dtype f32|f16|bf16]

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDACHECK(cmd)                                                                       \
	do {                                                                                     \
		cudaError_t e = (cmd);                                                               \
		if (e != cudaSuccess) {                                                              \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #cmd, cudaGetErrorString(e)); \
			exit(1);                                                                         \
		}                                                                                    \
	} while (0)

#define NCCLCHECK(cmd)                                                                        \
	do {                                                                                      \
		ncclResult_t r = (cmd);                                                               \
		if (r != ncclSuccess) {                                                               \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #cmd, ncclGetErrorString(r)); \
			exit(1);                                                                          \
		}                                                                                     \
	} while (0)

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// iters chooses how many calls to time: enough that small sizes measure the
// per-call overhead well, few enough that 1 GiB stays quick. The runtime's
// benchmark uses the same rule.
static int iters(size_t bytes) {
	size_t n = ((size_t)1 << 32) / (bytes > 1 ? bytes : 1);
	if (n < 20) n = 20;
	if (n > 2000) n = 2000;
	return (int)n;
}

int main(int argc, char **argv) {
	size_t maxBytes = (size_t)1 << 30;
	const char *dt = "f32";
	if (argc > 1) maxBytes = strtoull(argv[1], NULL, 0);
	if (argc > 2) dt = argv[2];
	ncclDataType_t type = ncclFloat32;
	size_t esz = 4;
	if (!strcmp(dt, "f16")) type = ncclFloat16, esz = 2;
	if (!strcmp(dt, "bf16")) type = ncclBfloat16, esz = 2;

	int ndev = 0;
	CUDACHECK(cudaGetDeviceCount(&ndev));
	int version = 0;
	NCCLCHECK(ncclGetVersion(&version));
	ncclComm_t *comms = calloc(ndev, sizeof *comms);
	cudaStream_t *streams = calloc(ndev, sizeof *streams);
	void **bufs = calloc(ndev, sizeof *bufs);
	cudaEvent_t *ev0 = calloc(ndev, sizeof *ev0), *ev1 = calloc(ndev, sizeof *ev1);
	NCCLCHECK(ncclCommInitAll(comms, ndev, NULL));
	for (int d = 0; d < ndev; d++) {
		CUDACHECK(cudaSetDevice(d));
		int lo, hi;
		CUDACHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
		// The runtime's communication streams run at high priority too.
		CUDACHECK(cudaStreamCreateWithPriority(&streams[d], cudaStreamNonBlocking, hi));
		CUDACHECK(cudaMalloc(&bufs[d], maxBytes));
		CUDACHECK(cudaMemset(bufs[d], 0, maxBytes));
		CUDACHECK(cudaEventCreate(&ev0[d]));
		CUDACHECK(cudaEventCreate(&ev1[d]));
	}
	printf("# C ncclAllReduce baseline: NCCL %d, %d GPU(s), dtype %s, in place\n", version, ndev, dt);
	printf("# %-12s %8s %12s %12s %10s %10s\n", "bytes", "iters", "host_us", "dev_us", "algbw", "busbw");
	for (size_t bytes = 4; bytes <= maxBytes; bytes *= 2) {
		size_t count = bytes / esz;
		if (count == 0) continue;
		int n = iters(bytes);
		for (int w = 0; w < 5; w++) {
			NCCLCHECK(ncclGroupStart());
			for (int d = 0; d < ndev; d++) NCCLCHECK(ncclAllReduce(bufs[d], bufs[d], count, type, ncclSum, comms[d], streams[d]));
			NCCLCHECK(ncclGroupEnd());
		}
		for (int d = 0; d < ndev; d++) CUDACHECK(cudaStreamSynchronize(streams[d]));
		double t0 = now();
		for (int d = 0; d < ndev; d++) {
			CUDACHECK(cudaSetDevice(d));
			CUDACHECK(cudaEventRecord(ev0[d], streams[d]));
		}
		for (int i = 0; i < n; i++) {
			if (ndev > 1) NCCLCHECK(ncclGroupStart());
			for (int d = 0; d < ndev; d++) NCCLCHECK(ncclAllReduce(bufs[d], bufs[d], count, type, ncclSum, comms[d], streams[d]));
			if (ndev > 1) NCCLCHECK(ncclGroupEnd());
		}
		for (int d = 0; d < ndev; d++) {
			CUDACHECK(cudaSetDevice(d));
			CUDACHECK(cudaEventRecord(ev1[d], streams[d]));
		}
		for (int d = 0; d < ndev; d++) CUDACHECK(cudaStreamSynchronize(streams[d]));
		double host = (now() - t0) / n;
		float ms = 0;
		CUDACHECK(cudaEventElapsedTime(&ms, ev0[0], ev1[0]));
		double dev = ms * 1e-3 / n;
		double algbw = bytes / dev / 1e9;
		double busbw = algbw * 2.0 * (ndev - 1) / ndev;
		printf("%-14zu %8d %12.2f %12.2f %10.2f %10.2f\n", bytes, n, host * 1e6, dev * 1e6, algbw, busbw);
	}
	for (int d = 0; d < ndev; d++) ncclCommDestroy(comms[d]);
	return 0;
}
