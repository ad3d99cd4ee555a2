"""Cubin loading: one module per (device, module name), loaded lazily and cached, functions cached.

Kernels run in the device's primary context, the one PyTorch uses. A module missing for this GPU's
arch is compiled with NVRTC into the user cache (announced once), or, without NVRTC, reported with
the archs that were built and the command that builds more.
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

from cuda.bindings import driver

from cukiln.core.archs import tuning_target
from cukiln.core.artifacts import CUBINS, cubin_relpath, generated_dir, read_manifest

from .driver import CudaError, check, launch_config

_DEFAULT_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a function may use without opting in


class KernelCache:
    """Owns every loaded module and function handle; one instance per process (``KERNELS``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: dict[int, object] = {}
        self._modules: dict[tuple[int, str], object] = {}
        self._functions: dict[tuple[int, str], object] = {}
        self._shared_limits: dict[tuple[int, str], int] = {}  # dynamic shared memory each function may use
        self._warned: set[str] = set()
        self._device_attributes: dict[tuple, int] = {}
        self._targets: dict[int, str] = {}
        self._occupancy: dict[tuple, int] = {}
        self._clusters: dict[tuple, int] = {}

    def context(self, device: int):
        """(primary context of ``device``, its integer handle): the context PyTorch uses too."""
        entry = self._contexts.get(device)
        if entry is None:
            with self._lock:
                check(driver.cuInit(0), "cuInit")
                dev = check(driver.cuDeviceGet(device), "cuDeviceGet")
                ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                entry = self._contexts.setdefault(device, (ctx, int(ctx)))
        return entry

    @contextmanager
    def current(self, device: int):
        """``device``'s primary context made current for the block (loading and attribute calls need it)."""
        ctx, _ = self.context(device)
        check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            yield
        finally:
            driver.cuCtxPopCurrent()

    def function(self, device: int, module: str, symbol: str, shared: int = 0):
        """The CUfunction for ``symbol`` on ``device``, allowed ``shared`` bytes of dynamic shared memory
        (loaded, and opted in above 48 KB, on first use)."""
        key = (device, symbol)
        fn = self._functions.get(key)
        if fn is None:
            with self.current(device), self._lock:  # current() first: it may take the lock itself
                mod = self._modules.get((device, module))
                if mod is None:
                    mod = self._modules[(device, module)] = self._load_module(device, module)
                fn = self._functions[key] = check(driver.cuModuleGetFunction(mod, symbol.encode()),
                                                  f"cuModuleGetFunction({symbol})")
        if shared > self._shared_limits.get(key, _DEFAULT_SHARED_LIMIT):
            # Above 48 KB a function must opt in before its launch.
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            with self.current(device):
                check(driver.cuFuncSetAttribute(fn, attr, shared), f"cuFuncSetAttribute({symbol}, {shared} bytes)")
            self._shared_limits[key] = shared
        return fn

    def active_clusters(self, device: int, module: str, symbol: str, threads: int, shared: int, cluster: int) -> int:
        """Clusters of ``cluster`` blocks (at most the portable 8) of ``symbol`` (``threads`` threads,
        ``shared`` bytes of dynamic shared memory) that ``device`` runs at once, as the driver computes it
        (cached); 0 when such a cluster cannot be placed at all."""
        key = (device, symbol, threads, shared, cluster)
        value = self._clusters.get(key)
        if value is None:
            fn = self.function(device, module, symbol, shared)
            config = launch_config((cluster, 1, 1), (threads, 1, 1), shared, cluster)
            with self.current(device):
                err, value = driver.cuOccupancyMaxActiveClusters(fn, config)
            # a cluster too large for the GPU is refused with an error: none fits
            self._clusters[key] = value = int(value) if err == driver.CUresult.CUDA_SUCCESS else 0
        return value

    def resident_blocks(self, device: int, module: str, symbol: str, threads: int, shared: int) -> int:
        """Blocks of ``symbol`` (``threads`` threads, ``shared`` bytes of dynamic shared memory) that one
        multiprocessor of ``device`` holds at once, as the driver computes it (cached)."""
        key = (device, symbol, threads, shared)
        value = self._occupancy.get(key)
        if value is None:
            fn = self.function(device, module, symbol, shared)
            with self.current(device):
                value = self._occupancy[key] = check(
                    driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, shared),
                    f"cuOccupancyMaxActiveBlocksPerMultiprocessor({symbol})")
        return value

    def sm_count(self, device: int) -> int:
        """Multiprocessors of ``device``."""
        return self._attribute(device, driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    def max_shared_per_block(self, device: int) -> int:
        """Dynamic shared memory a block of ``device`` may opt in to, in bytes."""
        attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        return self._attribute(device, attr)

    def _attribute(self, device: int, attr) -> int:
        value = self._device_attributes.get((device, attr))
        if value is None:
            check(driver.cuInit(0), "cuInit")
            dev = check(driver.cuDeviceGet(device), "cuDeviceGet")
            value = self._device_attributes[(device, attr)] = check(driver.cuDeviceGetAttribute(attr, dev),
                                                                    "cuDeviceGetAttribute")
        return value

    def tuning_target(self, device: int) -> str:
        """The key of ``device``'s own tuned rules (core.archs.tuning_target: its arch and name; cached)."""
        target = self._targets.get(device)
        if target is None:
            check(driver.cuInit(0), "cuInit")
            name = check(driver.cuDeviceGetName(256, check(driver.cuDeviceGet(device), "cuDeviceGet")), "cuDeviceGetName")
            name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
            target = self._targets[device] = tuning_target(self.arch(device), name)
        return target

    def arch(self, device: int) -> str:
        """"sm_XY" of ``device`` (cached: the decode call path asks on every call)."""
        attr = driver.CUdevice_attribute
        major = self._attribute(device, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attribute(device, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        return f"sm_{major}{minor}"

    def _load_module(self, device: int, module: str):
        arch = self.arch(device)
        path = generated_dir() / cubin_relpath(arch, module)
        cubin = path.read_bytes() if path.exists() else self._compile_missing(module, arch)
        err, mod = driver.cuModuleLoadData(cubin)
        if err != driver.CUresult.CUDA_SUCCESS:
            _, name = driver.cuGetErrorName(err)
            _, drv = driver.cuDriverGetVersion()
            built = read_manifest(generated_dir()).get("modules", {}).get(module, {}).get("cubins", {}).get(arch, {})
            raise CudaError(
                f"cannot load {module} for {arch}: {name.decode() if isinstance(name, bytes) else name}. "
                f"The cubin was built by NVRTC {built.get('nvrtc_version', '?')}; the driver supports CUDA "
                f"{drv // 1000}.{drv % 1000 // 10}. Rebuild with an NVRTC no newer than the driver "
                f"(`cukiln build --arch {arch}`) or update the driver."
            )
        return mod

    def _compile_missing(self, module: str, arch: str) -> bytes:
        built = sorted(p.name for p in (generated_dir() / CUBINS).glob("sm_*") if any(p.iterdir()))
        try:
            from cukiln.codegen.compile import compile_module
        except ImportError as e:  # no jinja2 / NVRTC in this environment
            raise CudaError(
                f"no cubin of {module} for this GPU ({arch}); built archs: {', '.join(built) or 'none'}. "
                f"Build it with `cukiln build --arch {arch}` (NVRTC is not importable here: {e})."
            ) from None
        if module not in self._warned:
            self._warned.add(module)
            warnings.warn(f"cukiln: no prebuilt {module} cubin for {arch} (built: {', '.join(built) or 'none'}); "
                          "compiling it now with NVRTC into the user cache", RuntimeWarning, stacklevel=4)
        root = generated_dir()
        source = (root / f"{module}.cu").read_text()
        headers = {p.name: p.read_text() for p in root.glob("*.cuh")}
        return compile_module(module, arch, source, headers).cubin


KERNELS = KernelCache()
