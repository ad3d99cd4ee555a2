"""The CUDA driver as cukiln calls it (cuda.bindings): error checking, and the launch configuration of a
programmatic or cluster launch. loader and launch both build on this; neither imports the other's internals."""

from __future__ import annotations

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
