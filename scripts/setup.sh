#!/bin/sh
# setup.sh installs what syncgen needs and the machine lacks: Open MPI
# (launcher and development files, from Debian's packages) and pkg-config,
# and for scripts/cluster.sh (the multi-host tests) util-linux's unshare and
# nsenter and iproute2's ip.
# It says what it does and does nothing when all is there.
set -eu

need=""
command -v mpirun >/dev/null 2>&1 || need="$need openmpi-bin"
if ! command -v pkg-config >/dev/null 2>&1; then
	need="$need pkg-config libopenmpi-dev"
elif ! pkg-config --exists ompi 2>/dev/null; then
	need="$need libopenmpi-dev"
fi
command -v gcc >/dev/null 2>&1 || need="$need gcc libc6-dev"
if ! command -v unshare >/dev/null 2>&1 || ! command -v nsenter >/dev/null 2>&1; then
	need="$need util-linux"
fi
command -v ip >/dev/null 2>&1 || need="$need iproute2"

if [ -z "$need" ]; then
	echo "setup: Open MPI is installed ($(mpirun --version 2>/dev/null | head -n 1))"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "setup: missing:$need; this is not a Debian/Ubuntu machine, install Open MPI and its development files with your package manager" >&2
	exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "setup: missing:$need; run as root or install sudo, or run: apt-get install$need" >&2
	exit 1
fi
echo "setup: installing$need from Debian's packages (apt-get)"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need openssh-client >/dev/null
echo "setup: done: $(mpirun --version 2>/dev/null | head -n 1)"
