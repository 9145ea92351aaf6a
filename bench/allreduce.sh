#!/bin/sh
# bench/allreduce.sh: one large allreduce through the syncgen runtime against
# a plain C program calling MPI_Allreduce on the same buffer sizes, in the
# same run. For each rank count and size it runs the two alternately
# (A B A B ...), takes the median bus bandwidth of each and prints their
# ratio (runtime / MPI). Comment lines under each row give the best of each
# (which on a shared, noisy machine estimates what each reaches
# undisturbed), and busbw computed from the median call time instead of the
# mean (how much of the difference is a tail of slow calls), and a third
# contender, bench/gompi: plain Go calling MPI_Allreduce through
# runtime/mpi with nothing of the runtime around it, which separates what
# calling MPI from a Go process costs from what the runtime adds. From 32
# MiB up, a fourth: the C program again with glibc's mmap and trim
# thresholds raised (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_). Plain
# MPI_Allreduce collapses there because Open MPI's algorithm mallocs a
# scratch buffer as large as the message, and glibc serves a malloc of 32
# MiB or more with a fresh mmap (its dynamic threshold stops at 32 MiB), so
# every call maps, page-faults and unmaps it; the fourth contender shows
# what C reaches without that trap. (Setting either variable turns the
# dynamic thresholds off, so both are needed: with the mmap threshold
# alone, a freed 256 MiB scratch at the top of the heap is trimmed after
# every call and faulted in again.) Up to 64 KiB, a fifth: the C program
# with the settings the runtime makes before MPI_Init (eager limit and
# fast boxes of 32 KiB, and on Open MPI 4 recursive doubling for 2-rank
# allreduces of 4 to 8 KiB; runtime/internal/mpihost/settings.go), which separates what
# those settings gain from the runtime's own cost.
# Rows have exactly five fields (bench/run.sh parses them).
# The target is >= 0.95 at every size.
#
#   sh bench/allreduce.sh                 # 2 and 4 ranks, 4 KiB .. 256 MiB
#   NPS="2" SIZES="1M 64M" ROUNDS=5 sh bench/allreduce.sh
#
# Every contender gets 5 warm-up calls (steps).
#
# Both sides time the same thing: after a barrier, one in-place f32 sum
# allreduce; the time is the maximum over ranks of each rank's mean over the
# iterations, busbw = bytes/time * 2(n-1)/n as nccl-tests. The runtime side
# is internal/testprog's "allreduce:SIZE" plan (one bucket, one allreduce per
# step), the same tables and Step calls a generated program makes; it reads
# the busbw from the program's --json output.
#
# Knobs: NPS, SIZES, ROUNDS (default 3), MPIRUN_ARGS (default
# "--oversubscribe --bind-to none", plus --allow-run-as-root as root),
# SYNCGEN_CPU_CHUNK (the runtime's piece size, exported to the ranks),
# PREBUILT (a folder holding testprog and gompi already built, for a
# machine without Go: see scripts/gpu-check.sh build).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-${TMPDIR:-/tmp}/syncgen-bench}
mkdir -p "$out"
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-"4K 16K 64K 256K 1M 4M 16M 32M 64M 128M 256M"}
ROUNDS=${ROUNDS:-3}
args=${MPIRUN_ARGS:-"--oversubscribe --bind-to none"}
if [ "$(id -u)" = 0 ]; then args="$args --allow-run-as-root"; fi
if [ -n "${SYNCGEN_CPU_CHUNK:-}" ]; then args="$args -x SYNCGEN_CPU_CHUNK"; fi

mpicc -O2 -o "$out/mpi_allreduce" "$root/bench/mpi_allreduce.c"
# The runtime's shared-memory settings (runtime/internal/mpihost/settings.go): btl/vader
# was renamed btl/sm in Open MPI 5.
sm=vader
case $(mpirun --version | head -1) in *" "[5-9].*) sm=sm ;; esac
transport="-x OMPI_MCA_btl_${sm}_eager_limit=32768 -x OMPI_MCA_btl_${sm}_fbox_size=32768"
# and on Open MPI 4 its allreduce rule: recursive doubling for 2 ranks
# from 4096 to 8191 bytes (the file's format is explained there).
if [ $sm = vader ]; then
	printf '1\n2 2\n2 3\n0 0 0 0\n4096 3 0 0\n8192 0 0 0\n3 1\n0 0 0 0\n' >"$out/allreduce-rules.conf"
	transport="$transport -x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_dynamic_rules_filename=$out/allreduce-rules.conf"
fi
if [ -n "${PREBUILT:-}" ]; then
	cp "$PREBUILT/testprog" "$PREBUILT/gompi" "$out/"
else
	(cd "$root" && go build -o "$out/testprog" ./runtime/internal/testprog && go build -o "$out/gompi" ./bench/gompi)
fi

bytes_of() { # 4K -> 4096
	case $1 in
	*K) echo $((${1%K} * 1024)) ;;
	*M) echo $((${1%M} * 1024 * 1024)) ;;
	*G) echo $((${1%G} * 1024 * 1024 * 1024)) ;;
	*) echo "$1" ;;
	esac
}
iters_of() { # about 1 s of work at 1 GB/s, 5 to 40000 calls
	# (At most 1000 calls made a 4 KiB run only 4 ms of C's time, in which
	# one stall of the machine decided the figure; 0.2 s of work made a 16
	# MiB run 11 calls, whose mean a single slow call moved by 10%.)
	n=$((1000000000 / ($1 + 20000)))
	[ $n -lt 5 ] && n=5
	[ $n -gt 40000 ] && n=40000
	echo $n
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
best() { sort -g | tail -1; }

echo "# syncgen runtime vs plain MPI_Allreduce ($(mpirun --version | head -1)), $ROUNDS rounds, medians of busbw in GB/s"
printf "# %5s %12s %10s %10s %8s\n" ranks bytes mpi runtime ratio
for np in $NPS; do
	for s in $SIZES; do
		b=$(bytes_of "$s")
		n=$(iters_of "$b")
		: >"$out/a.txt"
		: >"$out/b.txt"
		: >"$out/am.txt"
		: >"$out/bm.txt"
		: >"$out/g.txt"
		: >"$out/p.txt"
		: >"$out/t.txt"
		: >"$out/s.txt"
		r=0
		while [ $r -lt "$ROUNDS" ]; do
			# shellcheck disable=SC2086
			mpirun $args -np "$np" "$out/mpi_allreduce" -b "$b" -e "$b" -n "$n" -w 5 >"$out/c.txt"
			awk '!/^#/ {print $4}' "$out/c.txt" >>"$out/a.txt"
			awk -v n="$np" '!/^#/ {print $1 / $5 / 1e3 * 2 * (n - 1) / n}' "$out/c.txt" >>"$out/am.txt"
			if [ "$b" -ge $((32 * 1024 * 1024)) ]; then
				# shellcheck disable=SC2086
				mpirun $args -x MALLOC_MMAP_THRESHOLD_=1073741824 -x MALLOC_TRIM_THRESHOLD_=4294967296 \
					-np "$np" "$out/mpi_allreduce" -b "$b" -e "$b" -n "$n" -w 5 |
					awk '!/^#/ {print $4}' >>"$out/t.txt"
			fi
			if [ "$b" -le 65536 ]; then
				# shellcheck disable=SC2086
				mpirun $args $transport -np "$np" "$out/mpi_allreduce" -b "$b" -e "$b" -n "$n" -w 5 |
					awk '!/^#/ {print $4}' >>"$out/s.txt"
			fi
			# shellcheck disable=SC2086
			mpirun $args -np "$np" "$out/gompi" -b "$b" -n "$n" -w 5 | awk '!/^#/ {print $4}' >>"$out/g.txt"
			# shellcheck disable=SC2086
			mpirun $args -np "$np" "$out/testprog" "allreduce:${b}B" --steps "$n" --warmup 5 --check off \
				--quiet --json "$out/rt.json" >/dev/null
			sed -n 's/.*"busbw_gbs": \([0-9.e+-]*\).*/\1/p' "$out/rt.json" | head -1 >>"$out/b.txt"
			# this round's ratio: the runtime against the C run just before it
			paste "$out/a.txt" "$out/b.txt" | tail -1 | awk '{print ($1 > 0) ? $2 / $1 : 0}' >>"$out/p.txt"
			sed -n 's/.*"time_median_us": \([0-9.e+-]*\).*/\1/p' "$out/rt.json" | head -1 |
				awk -v b="$b" -v n="$np" '{print b / $1 / 1e3 * 2 * (n - 1) / n}' >>"$out/bm.txt"
			r=$((r + 1))
		done
		a=$(median <"$out/a.txt")
		c=$(median <"$out/b.txt")
		ab=$(best <"$out/a.txt")
		cb=$(best <"$out/b.txt")
		ratio() { echo "$1 $2" | awk '{print ($2 > 0) ? $1 / $2 : 0}'; }
		printf "  %5d %12d %10.3f %10.3f %8.2f\n" "$np" "$b" "$a" "$c" "$(ratio "$c" "$a")"
		printf "# %5s %12s %10.3f %10.3f %8.2f   (best of %d)\n" "" "" "$ab" "$cb" "$(ratio "$cb" "$ab")" "$ROUNDS"
		am=$(median <"$out/am.txt")
		cm=$(median <"$out/bm.txt")
		printf "# %5s %12s %10.3f %10.3f %8.2f   (from median call times)\n" "" "" "$am" "$cm" "$(ratio "$cm" "$am")"
		pr=$(median <"$out/p.txt")
		printf "# %5s %12s %10s %10s %8.2f   (median of the rounds' own ratios, each round's runtime against its C run)\n" "" "" "" "" "$pr"
		g=$(median <"$out/g.txt")
		printf "# %5s %12s %10.3f %10.3f %8.2f   (plain Go calling MPI_Allreduce, bench/gompi, in the mpi column)\n" "" "" "$g" "$c" "$(ratio "$c" "$g")"
		if [ -s "$out/s.txt" ]; then
			x=$(median <"$out/s.txt")
			printf "# %5s %12s %10.3f %10.3f %8.2f   (C with the runtime's MPI settings, in the mpi column)\n" "" "" "$x" "$c" "$(ratio "$c" "$x")"
		fi
		if [ -s "$out/t.txt" ]; then
			t=$(median <"$out/t.txt")
			printf "# %5s %12s %10.3f %10.3f %8.2f   (C with glibc's mmap and trim thresholds raised, MALLOC_MMAP_THRESHOLD_=1GiB MALLOC_TRIM_THRESHOLD_=4GiB, in the mpi column)\n" "" "" "$t" "$c" "$(ratio "$c" "$t")"
		fi
	done
done
