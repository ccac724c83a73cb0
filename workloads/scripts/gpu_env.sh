# Sourced by every script here before it touches a GPU: NVLink multicast (NVLS) off in NCCL,
# in PyTorch's symmetric memory and in NVSHMEM, so that the runs take the same paths on every
# host (multicast needs fabric support that virtualised GPU hosts often lack), and NCCL's
# warnings only, unless the caller asked for more.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
