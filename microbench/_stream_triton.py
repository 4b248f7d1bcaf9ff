"""Triton kernels for the bandwidth probe: read (a reduction), write (a fill), copy, triad.

Imported only when Triton is used (``microbench.bandwidth`` falls back to torch ops without
it). Every kernel takes the same tuning knobs, so one configuration type tunes them all:

- ``BLOCK``: elements per tile. Elements per thread = BLOCK / (32 * num_warps); Triton loads
  them as 16-byte vectors (4 fp32), so BLOCK=4096 with 8 warps keeps 4 loads per thread in
  flight. Masks stay vectorised because Triton specialises ``n`` on divisibility by 16.
- ``PERSISTENT``: False launches one program per tile; True launches a fixed grid (a few
  programs per SM, chosen by the caller) that strides over the tiles.
- ``LOAD_POLICY`` / ``STORE_CACHE``: "" (default) or "evict_first" / ".cs" (streaming), so
  a buffer many times the L2 does not evict data it will never reuse.

Offsets are 64-bit (arrays past 2**31 elements). The read kernel writes one fp32 partial sum
per program; the caller sums the partials (a few hundred values) when it checks the result.
"""

import triton
import triton.language as tl


@triton.jit
def read_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
                LOAD_POLICY: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    if PERSISTENT:
        for tile in tl.range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):
            offs = tile.to(tl.int64) * BLOCK + lanes
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy=LOAD_POLICY)
    else:
        offs = pid.to(tl.int64) * BLOCK + lanes
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy=LOAD_POLICY)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def fill_kernel(y_ptr, value, n, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
                STORE_CACHE: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    vals = tl.zeros([BLOCK], dtype=tl.float32) + value
    if PERSISTENT:
        for tile in tl.range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):
            offs = tile.to(tl.int64) * BLOCK + lanes
            tl.store(y_ptr + offs, vals, mask=offs < n, cache_modifier=STORE_CACHE)
    else:
        offs = pid.to(tl.int64) * BLOCK + lanes
        tl.store(y_ptr + offs, vals, mask=offs < n, cache_modifier=STORE_CACHE)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
                LOAD_POLICY: tl.constexpr, STORE_CACHE: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if PERSISTENT:
        for tile in tl.range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):
            offs = tile.to(tl.int64) * BLOCK + lanes
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
            tl.store(y_ptr + offs, x, mask=mask, cache_modifier=STORE_CACHE)
    else:
        offs = pid.to(tl.int64) * BLOCK + lanes
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
        tl.store(y_ptr + offs, x, mask=mask, cache_modifier=STORE_CACHE)


@triton.jit
def triad_kernel(b_ptr, c_ptr, a_ptr, scalar, n, BLOCK: tl.constexpr, PERSISTENT: tl.constexpr,
                 LOAD_POLICY: tl.constexpr, STORE_CACHE: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    if PERSISTENT:
        for tile in tl.range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):
            offs = tile.to(tl.int64) * BLOCK + lanes
            mask = offs < n
            b = tl.load(b_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
            c = tl.load(c_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
            tl.store(a_ptr + offs, b + scalar * c, mask=mask, cache_modifier=STORE_CACHE)
    else:
        offs = pid.to(tl.int64) * BLOCK + lanes
        mask = offs < n
        b = tl.load(b_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
        c = tl.load(c_ptr + offs, mask=mask, eviction_policy=LOAD_POLICY)
        tl.store(a_ptr + offs, b + scalar * c, mask=mask, cache_modifier=STORE_CACHE)


def grid_size(n: int, block: int, programs_per_sm: int, sms: int) -> int:
    tiles = triton.cdiv(n, block)
    return min(tiles, programs_per_sm * sms) if programs_per_sm > 0 else tiles


KERNELS = {"read": read_kernel, "write": fill_kernel, "copy": copy_kernel, "triad": triad_kernel}


def _options(method: str, config) -> dict:
    """The constexpr and launch options of ``method``'s kernel under ``config`` (part of its cache key)."""
    if method not in KERNELS:
        raise ValueError(f"unknown method {method!r}")
    options = {"BLOCK": config.block, "PERSISTENT": config.programs_per_sm > 0, "num_warps": config.warps}
    if config.stages:
        options["num_stages"] = config.stages
    if method != "write":
        options["LOAD_POLICY"] = "evict_first" if config.streaming else ""
    if method != "read":
        options["STORE_CACHE"] = ".cs" if config.streaming else ""
    return options


def launcher(method: str, config, sms: int, arrays: dict, scalar: float, fill_value: float):
    """A no-argument function that runs ``method``'s kernel once on ``arrays`` (a, b, c, partials)."""
    options = _options(method, config)
    n = arrays["b"].numel()
    grid = (grid_size(n, config.block, config.programs_per_sm, sms),)
    a, b, c = arrays["a"], arrays["b"], arrays["c"]
    if method == "read":
        if grid[0] > arrays["partials"].numel():
            raise ValueError(f"BLOCK={config.block} gives {grid[0]} programs, more than the "
                             f"{arrays['partials'].numel()} partial sums allocated")
        partials = arrays["partials"][: grid[0]]

        def run():
            read_kernel[grid](b, partials, n, **options)
            return partials
    elif method == "write":
        def run():
            fill_kernel[grid](a, fill_value, n, **options)
    elif method == "copy":
        def run():
            copy_kernel[grid](b, a, n, **options)
    else:
        def run():
            triad_kernel[grid](b, c, a, scalar, n, **options)
    return run, grid[0]
