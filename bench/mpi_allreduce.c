// mpi_allreduce: the baseline of bench/allreduce.sh. It calls MPI_Allreduce
// in place on a float buffer for each size and prints nccl-tests' figures:
// time per call (us), algbw = bytes/time and busbw = algbw * 2(n-1)/n, in
// GB/s. Every rank times the same calls; the time reported is the maximum
// over ranks of the mean over iterations (as the runtime's report does),
// and a comment line before each row gives every rank's mean.
//
//   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
//   mpirun -np 4 ./mpi_allreduce [-b 4K] [-e 256M] [-f 2] [-n iters] [-w warmup]
//          [-m blocking|nonblocking|chunked|chunked-blocking|avg|avg2] [-c chunk] [-k inflight]
//          [-p pool]
//
// -p cycles the calls through a pool of that many bytes, each call on the
// next buffer of the message's size, so that the data comes from memory
// as a plan's many buckets do, not from the cache a lone buffer stays in.
//
// nonblocking, chunked and chunked-blocking are there to find where Open
// MPI's algorithms fall off a cliff: nonblocking is MPI_Iallreduce +
// MPI_Wait, chunked splits each call into pieces of -c bytes with -k in
// flight (MPI_Iallreduce + MPI_Testsome), chunked-blocking calls
// MPI_Allreduce on the pieces one after another.
//
// avg and avg2 are what an average costs a C program, the floor of
// bench/avg.sh's runtime figures (MPI has no average operator): avg is
// MPI_SUM and then a division of every element, multiplying by 1/size
// where size is a power of two (the same value); avg2, with two ranks only,
// is a user-defined operator that adds and halves (applied once to each
// element of two ranks). Build with -O3 -march=native so that the division
// is vectorised, as the runtime's is.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_size(const char *s) {
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	}
	return (long)v;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

// avg2_op adds and halves: the average of two ranks in one operator.
static void avg2_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	const float *a = in;
	float *b = inout;
	for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
	for (int i = 0; i < *len; i++) b[i] *= 0.5f;
}

// divide divides count floats by size, as an average's sum is divided.
static void divide(float *buf, long count, int size) {
	if ((size & (size - 1)) == 0) {
		float r = 1.0f / (float)size;
		for (long i = 0; i < count; i++) buf[i] *= r;
	} else {
		float d = (float)size;
		for (long i = 0; i < count; i++) buf[i] /= d;
	}
}

static void run_chunked(float *buf, long count, long chunk, int inflight) {
	MPI_Request req[64];
	int idx[64];
	long next = 0;
	int live = 0;
	for (int i = 0; i < inflight; i++) req[i] = MPI_REQUEST_NULL;
	while (next < count || live > 0) {
		for (int i = 0; i < inflight && next < count; i++) {
			if (req[i] != MPI_REQUEST_NULL) continue;
			long n = count - next < chunk ? count - next : chunk;
			MPI_Iallreduce(MPI_IN_PLACE, buf + next, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[i]);
			next += n;
			live++;
		}
		int out;
		MPI_Testsome(inflight, req, &out, idx, MPI_STATUSES_IGNORE);
		if (out != MPI_UNDEFINED) live -= out;
	}
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long minb = 4096, maxb = 256L << 20, chunk = 4L << 20, pool = 0;
	double factor = 2;
	int iters = 0, warmup = 2, inflight = 2;
	const char *mode = "blocking";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-m")) mode = argv[i + 1];
		else if (!strcmp(argv[i], "-c")) chunk = parse_size(argv[i + 1]);
		else if (!strcmp(argv[i], "-k")) inflight = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-p")) pool = parse_size(argv[i + 1]);
	}
	if (pool < maxb) pool = maxb;
	MPI_Op avg2 = MPI_OP_NULL;
	if (!strcmp(mode, "avg2")) {
		if (size != 2) {
			if (rank == 0) fprintf(stderr, "mpi_allreduce: -m avg2 needs 2 ranks, not %d\n", size);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		MPI_Op_create(avg2_op, 1, &avg2);
	}
	if (inflight < 1) inflight = 1;
	if (inflight > 64) inflight = 64;
	float *base = NULL;
	if (posix_memalign((void **)&base, 64, pool)) MPI_Abort(MPI_COMM_WORLD, 1);
	memset(base, 0, pool);
	if (rank == 0)
		printf("# mpi_allreduce mode=%s ranks=%d chunk=%ld inflight=%d pool=%ld\n# %12s %12s %10s %10s %12s\n", mode, size,
		       chunk, inflight, pool, "bytes", "time(us)", "algbw", "busbw", "median(us)");
	for (long bytes = minb; bytes <= maxb; bytes = (long)(bytes * factor)) {
		long count = bytes / 4;
		int n = iters;
		if (n <= 0) { // about 1 s of work per size at 1 GB/s, 5 to 40000 calls
			n = (int)(1e9 / (bytes + 20000));
			if (n < 5) n = 5;
			if (n > 40000) n = 40000;
		}
		double t = 0;
		static double samples[100000];
		long buffers = pool / bytes;
		for (int it = -warmup; it < n; it++) {
			float *buf = base + (long)((it + warmup) % buffers) * count;
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			if (!strcmp(mode, "nonblocking")) {
				MPI_Request r;
				MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
				MPI_Wait(&r, MPI_STATUS_IGNORE);
			} else if (!strcmp(mode, "chunked")) {
				run_chunked(buf, count, chunk / 4, inflight);
			} else if (!strcmp(mode, "chunked-blocking")) {
				for (long off = 0; off < count; off += chunk / 4) {
					long m = count - off < chunk / 4 ? count - off : chunk / 4;
					MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				}
			} else if (!strcmp(mode, "avg")) {
				MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				divide(buf, count, size);
			} else if (!strcmp(mode, "avg2")) {
				MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, avg2, MPI_COMM_WORLD);
			} else {
				MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			}
			if (it >= 0) {
				double d = MPI_Wtime() - t0;
				t += d;
				if (it < 100000) samples[it] = d;
			}
		}
		t /= n;
		// Each rank's mean, as a comment line: which rank waits, and how
		// far apart the ranks' means are (max over ranks is the figure).
		double *all = rank == 0 ? malloc(size * sizeof(double)) : NULL;
		MPI_Gather(&t, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			printf("# per-rank mean (us):");
			for (int r = 0; r < size; r++) printf(" %.3f", all[r] * 1e6);
			printf("\n");
			free(all);
		}
		int m = n < 100000 ? n : 100000;
		qsort(samples, m, sizeof(double), cmp_double);
		double med = samples[m / 2];
		MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		double alg = bytes / t / 1e9, bus = alg * 2.0 * (size - 1) / size;
		if (rank == 0) printf("  %12ld %12.1f %10.3f %10.3f %12.1f\n", bytes, t * 1e6, alg, bus, med * 1e6);
		fflush(stdout);
	}
	free(base);
	if (avg2 != MPI_OP_NULL) MPI_Op_free(&avg2);
	MPI_Finalize();
	return 0;
}
