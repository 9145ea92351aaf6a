# gpu-env.sh: source it on a GPU machine to point syncgen at CUDA and NCCL
# where they are not on the loader's path (a CUDA toolkit in
# /usr/local/cuda, NCCL from the nvidia-nccl Python wheel), and to set what
# the C baseline needs to build. Variables already set are kept.
#
#   . scripts/gpu-env.sh
#
# Sets SYNCGEN_NCCL_LIB, SYNCGEN_CUDART_LIB, NCCL_HOME (its include/ has the
# nccl.h of the libnccl syncgen loads), NCCL_LIBDIR (that library's folder),
# CUDA_HOME, and NCCL_NVLS_ENABLE=0 (NVLink multicast stays off on shared
# machines).

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

_sg_find() { # _sg_find NAME DIR...: the first file called NAME under DIRs
	local n=$1; shift
	find "$@" -name "$n" \( -type f -o -type l \) 2>/dev/null | sort | head -1
}
_sg_py=$(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)

if [ -z "${CUDA_HOME:-}" ]; then
	if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"); else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME

if [ -z "${SYNCGEN_CUDART_LIB:-}" ] && ! ldconfig -p | grep -q 'libcudart.so.1[23] '; then
	SYNCGEN_CUDART_LIB=$(_sg_find 'libcudart.so.13' "$CUDA_HOME" /usr/local /usr/lib $_sg_py)
	[ -n "$SYNCGEN_CUDART_LIB" ] || SYNCGEN_CUDART_LIB=$(_sg_find 'libcudart.so.12' "$CUDA_HOME" /usr/local /usr/lib $_sg_py)
	export SYNCGEN_CUDART_LIB
fi

if [ -z "${SYNCGEN_NCCL_LIB:-}" ] && ! ldconfig -p | grep -q 'libnccl.so.2 '; then
	SYNCGEN_NCCL_LIB=$(_sg_find 'libnccl.so.2' /usr/local /usr/lib /opt $_sg_py)
	export SYNCGEN_NCCL_LIB
fi

# The C baseline must build against the NCCL that syncgen loads: the header
# next to that library, and the library's own folder.
_sg_lib=${SYNCGEN_NCCL_LIB:-$(ldconfig -p | awk '/libnccl\.so\.2 /{print $NF; exit}')}
if [ -n "$_sg_lib" ]; then
	NCCL_LIBDIR=$(dirname "$(readlink -f "$_sg_lib")")
	export NCCL_LIBDIR
	if [ -z "${NCCL_HOME:-}" ]; then
		for _sg_d in "$NCCL_LIBDIR/.." "$NCCL_LIBDIR/../.." /usr; do
			if [ -f "$_sg_d/include/nccl.h" ]; then NCCL_HOME=$(readlink -f "$_sg_d"); break; fi
		done
		export NCCL_HOME
	fi
fi
unset -f _sg_find
unset _sg_py _sg_lib _sg_d
echo "gpu-env: CUDA_HOME=$CUDA_HOME NCCL_HOME=${NCCL_HOME:-} NCCL_LIBDIR=${NCCL_LIBDIR:-} SYNCGEN_CUDART_LIB=${SYNCGEN_CUDART_LIB:-(loader path)} SYNCGEN_NCCL_LIB=${SYNCGEN_NCCL_LIB:-(loader path)}"
