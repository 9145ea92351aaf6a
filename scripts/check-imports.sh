#!/bin/sh
# check-imports.sh keeps the rooms rooms: every package of the module has a
# layer below, and may import only packages of lower layers. The runtime's
# layers and the compiler's are apart: neither side imports the other, but
# for the compiler's tests, which may import the runtime's contract (package
# runtime) to check that they agree. Tests' other imports may point up: an
# end-to-end test of a lower package runs the higher ones. `make vet` runs
# it.
#
# Shared packages are the exception: a shared package imports nothing of
# the module (checked here), so both sides may import it. The cost model
# (runtime/costmodel) is one: syncgen predict and tune use it on the
# compiler's IR and a generated program on its recorded plan, and one
# implementation keeps predicted and measured comparable. It lives under
# runtime/ so that it travels with the runtime's embedded source.
set -eu
cd "$(dirname "$0")/.."
module=$(go list -m)

# Shared packages (see above), one a line.
shared='
runtime/costmodel
'

# package (relative to the module; . is the module's root) and its layer.
layers='
runtime/internal/text            0
runtime/internal/proc            0
runtime/internal/dl              0
runtime/internal/elem            0
runtime/costmodel                0
runtime/internal/hetero          0
runtime/internal/optim           1
runtime/internal/scaler          1
runtime/internal/ckpt            1
runtime/mpi                      1
runtime/cuda                     1
runtime/internal/plan            2
runtime/nccl                     2
runtime/internal/mpihost         2
runtime/internal/backend         3
runtime/internal/backend/cpu     4
runtime/internal/backend/nccl    4
runtime/internal/forecast        4
runtime/internal/check           4
runtime/internal/result          4
runtime/internal/engine          5
runtime/internal/report          5
runtime                          6
runtime/internal/testprog        7
bench/gompi                      7
bench/gpu/allops                 7
bench/gpu/rtbench                7
ir                               100
importer                         100
stdlib                           100
.                                100
dsl                              101
codegen                          101
build                            101
predict                          101
calibrate                        101
tune                             102
cmd/syncgen                      103
'

go list -f '{{.ImportPath}} {{join .Imports " "}} | {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
	awk -v module="$module" -v layers="$layers" -v shared="$shared" '
	function rel(p) {
		if (p == module) return "."
		if (index(p, module "/") == 1) return substr(p, length(module) + 2)
		return ""
	}
	BEGIN {
		n = split(layers, lines, "\n")
		for (i = 1; i <= n; i++) {
			if (split(lines[i], f, " ") == 2) layer[f[1]] = f[2]
		}
		n = split(shared, lines, "\n")
		for (i = 1; i <= n; i++) {
			if (lines[i] != "") isShared[lines[i]] = 1
		}
	}
	{
		from = rel($1)
		if (!(from in layer)) {
			printf "check-imports: package %s has no layer: add it to scripts/check-imports.sh\n", from
			bad = 1
			next
		}
		tests = 0
		for (i = 2; i <= NF; i++) {
			if ($i == "|") { tests = 1; continue }
			to = rel($i)
			if (to == "" || to == from) continue
			if (!(to in layer)) continue # reported as an importer of its own
			if (from in isShared && !tests) {
				printf "check-imports: %s is shared by the runtime and the compiler and must import nothing of the module, but imports %s\n", from, to
				bad = 1
				continue
			}
			if (to in isShared) continue
			lf = layer[from]; lt = layer[to]
			runtimeSide = lf < 100; toRuntime = lt < 100
			if (tests && !runtimeSide && to == "runtime") continue
			if (runtimeSide != toRuntime || (!tests && lt >= lf)) {
				printf "check-imports: %s (layer %d) imports %s (layer %d): imports point to lower layers only\n", from, lf, to, lt
				bad = 1
			}
		}
	}
	END { exit bad }'
