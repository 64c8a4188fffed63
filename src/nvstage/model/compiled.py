"""A workload's compiled kernels, as the model needs them: each launched kernel's resources
(registers, shared memory, barriers, spills from ptxas and cuobjdump), the theoretical occupancy
of each launch, and each kernel's SASS read for the kernel bounds (``model.kernelcode``).

The workload is compiled once per (code, file stamp, arch, toolkit) in a process: an estimate,
a comparison and a calibration read the same workload more than once.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from nvstage.inspect.kernels import KernelRecord, KernelNames, final_rows
from nvstage.model.kernelcode import KernelCode, workload_code
from nvstage.run.prepare import Prepared, prepare
from nvstage.run.workload import Workload
from nvstage.errors import ArtifactError, ToolkitError
from nvstage.run.workload.validate import raise_on_errors, validate
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.occupancy import occupancy
from nvstage.model.ptx_walk import parse_function


@dataclass(frozen=True)
class LaunchFacts:
    """One launch entry: its kernel's record (resources from ptxas and cuobjdump) with the
    launch's dimensions and the theoretical occupancy they give."""

    kernel: str  # as the workload names it
    record: KernelRecord
    shared_dynamic: int
    block_size: int
    grid_blocks: int
    occupancy: float  # theoretical, 0..1
    active_blocks_per_sm: int
    warps_per_block: int
    limiters: tuple[str, ...]

    symbol = property(lambda self: self.record.kernel)
    registers = property(lambda self: self.record.registers)
    spill_stores = property(lambda self: self.record.spill_stores)
    spill_loads = property(lambda self: self.record.spill_loads)
    spill_bytes = property(lambda self: self.record.spill_bytes)
    shared_static = property(lambda self: self.record.shared_bytes)
    barriers = property(lambda self: self.record.barriers or 0)
    resource_source = property(lambda self: self.record.source)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "symbol": self.symbol, "registers": self.registers,
                "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
                "shared_static": self.shared_static, "shared_dynamic": self.shared_dynamic,
                "barriers": self.barriers, "block_size": self.block_size,
                "grid_blocks": self.grid_blocks, "occupancy": self.occupancy,
                "active_blocks_per_sm": self.active_blocks_per_sm,
                "warps_per_block": self.warps_per_block, "limiters": list(self.limiters),
                "resource_source": self.resource_source}


# The last few builds by (code, file stamp, arch, toolkit), with their SASS once read. Bounded,
# so a long-lived process (a notebook, the test session) keeps only the latest.
_KEPT = 32
_memo: OrderedDict[tuple, list] = OrderedDict()


def _entry(w: Workload, arch: str, toolkit) -> list:
    """[Prepared, code by symbol or None until read, then PTX functions by symbol] for the
    workload's build."""
    import os

    code = w.code
    key = (code.kind, code.path, os.stat(code.path).st_mtime_ns, code.ptx, code.stop,
           code.defines, code.include_dirs, code.flags, arch, toolkit)
    entry = _memo.get(key)
    if entry is None:
        entry = [prepare(w, arch, toolkit=toolkit, resources=True), None]
        _memo[key] = entry
        while len(_memo) > _KEPT:
            _memo.popitem(last=False)
    _memo.move_to_end(key)
    return entry


def _prepared(w: Workload, arch: str, toolkit) -> Prepared:
    return _entry(w, arch, toolkit)[0]


def kernel_resources(w: Workload, arch: str, *, toolkit=None) -> dict[str, KernelRecord]:
    """Compile the workload's code for ``arch`` (``nvstage.run.prepare``: resources from ptxas
    -v and cuobjdump), validate every launch against the kernels' parameter lists, and map
    each launched kernel name to its ``KernelRecord`` (``inspect.kernels``: named as
    ``show --kernel`` names it, the final record where an -rdc build has two)."""
    prep = _prepared(w, arch, toolkit)
    raise_on_errors(validate(w, prep.sigs))
    records = KernelNames(final_rows(prep.resources or []))
    symbols = prep.mangled()
    out = {}
    for lz in w.launches:
        symbol = symbols.get(lz.kernel, lz.kernel)
        if symbol not in records:
            raise ArtifactError(f"no resource usage for kernel {lz.kernel} ({symbol}) on {arch}",
                                hint="is the kernel compiled for this arch?")
        out[lz.kernel] = records[symbol]
    return out


def kernel_facts(w: Workload, arch: str, resources: Mapping[str, KernelRecord]
                 ) -> list[LaunchFacts]:

    values = w.param_values()
    out = []
    for i, lz in enumerate(w.launches):
        r = resources[lz.kernel]
        d = w.dims(i, values)
        block = math.prod(d["block"])
        occ = occupancy(arch, block_size=block, registers=r.registers,
                        shared_static=r.shared_bytes, shared_dynamic=d["shared"],
                        barriers=r.barriers or 0)
        out.append(LaunchFacts(
            kernel=lz.kernel, record=r, shared_dynamic=d["shared"], block_size=block,
            grid_blocks=math.prod(d["grid"]), occupancy=occ.occupancy,
            active_blocks_per_sm=occ.active_blocks, warps_per_block=occ.warps_per_block,
            limiters=occ.limiters))
    return out


def kernel_code(w: Workload, arch: str, *, toolkit=None) -> dict[str, KernelCode | None]:
    """Each launched kernel's SASS for ``arch`` (None where there is none: a PTX workload)."""
    if toolkit is None:

        toolkit = find_toolkit()

    entry = _entry(w, arch, toolkit)
    prep = entry[0]
    if entry[1] is None:
        # Every module's code: kept Triton builds are one module each, and each kernel is
        # read from its own (the first alone left the others with no SASS).
        images = ([(kind, image) for kind, image, _ in prep.modules] if prep.modules
                  else [(prep.kind, prep.image)])
        entry[1] = {}
        for kind, image in images:
            try:
                entry[1].update(workload_code(image, kind, arch, toolkit))
            except (ArtifactError, ToolkitError):  # the estimate goes on without it, noted
                pass
    symbols = prep.mangled()
    return {lz.kernel: entry[1].get(symbols.get(lz.kernel, lz.kernel)) for lz in w.launches}


def kernel_ptx(w: Workload, arch: str, *, toolkit=None) -> dict:
    """Each launched kernel's PTX function (``model.ptx_walk``), None where there is none
    (packaged code without its PTX)."""
    entry = _entry(w, arch, toolkit)
    prep = entry[0]
    if len(entry) < 3:
        entry.append({})
    parsed = entry[2]
    symbols = prep.mangled()
    out = {}
    for lz in w.launches:
        symbol = symbols.get(lz.kernel, lz.kernel)
        if symbol not in parsed:
            parsed[symbol] = next((f for text in prep.ptx_texts
                                   if (f := parse_function(text, symbol)) is not None), None)
        out[lz.kernel] = parsed[symbol]
    return out
