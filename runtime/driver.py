"""The CUDA driver as cukiln calls it (cuda.bindings): error checking, the launch configuration of a
programmatic or cluster launch, and TMA tensor maps. loader and launch both build on this; neither imports the
other's internals."""

from __future__ import annotations

import ctypes

from cuda.bindings import driver

SUCCESS = driver.CUresult.CUDA_SUCCESS


class CudaError(RuntimeError):
    pass


def check(result, what: str):
    """Unwraps a cuda.bindings return tuple, raising CudaError with the call's name on failure."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise CudaError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


_TENSOR_MAP_TYPES = {"bf16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                     "fp16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                     "e4m3": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8}  # FP8 bytes, moved as they are


_L2_PROMOTIONS = {0: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  64: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                  128: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  256: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B}


def tensor_map(dtype: str, ptr: int, dims, strides_bytes, box, swizzled: bool = True, *, l2_promotion: int) -> bytes:
    """The 128 bytes of a tiled TMA tensor map, as a kernel parameter takes them: ``dtype`` elements ("bf16",
    "fp16", "e4m3") at ``ptr`` (16-byte aligned), ``dims`` innermost first, ``strides_bytes`` of every dim but the innermost
    (multiples of 16), ``box`` elements per dim; the 128-byte swizzle (or none), the L2 fetching ``l2_promotion``
    bytes around each request (0, 64, 128 or 256: it sets the speed of a stream, codegen/decode_abi.WS_L2_PROMOTION),
    elements out of bounds read as zeros."""
    swizzle = driver.CUtensorMapSwizzle
    encoded = check(driver.cuTensorMapEncodeTiled(
        _TENSOR_MAP_TYPES[dtype], len(dims), ptr, [driver.cuuint64_t(n) for n in dims],
        [driver.cuuint64_t(n) for n in strides_bytes], [driver.cuuint32_t(n) for n in box],
        [driver.cuuint32_t(1)] * len(dims), driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle.CU_TENSOR_MAP_SWIZZLE_128B if swizzled else swizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        _L2_PROMOTIONS[l2_promotion],
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(encoded.getPtr(), 128)


def launch_config(grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, cluster: int = 1):
    """A CUlaunchConfig (stream unset) for a programmatic launch, in clusters of ``cluster`` blocks along x."""
    attribute = driver.CUlaunchAttribute()
    attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    attributes = [attribute]
    if cluster > 1:
        dims = driver.CUlaunchAttribute()
        dims.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dims.value.clusterDim.x, dims.value.clusterDim.y, dims.value.clusterDim.z = cluster, 1, 1
        attributes.append(dims)
    config = driver.CUlaunchConfig()
    config.attrs = attributes
    config.numAttrs = len(attributes)
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared
    return config
