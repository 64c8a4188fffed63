"""The instruction mix: SASS opcodes counted by the kind of work they do.

One table, class -> opcodes, for every view (``show``'s mix per kernel and per source line) and
for the offline estimate of the kernel term, which weighs each class by its throughput per SM.
Opcodes are the base mnemonic nvdisasm prints ("IMAD" for "IMAD.WIDE.U32"); the memory classes
also carry their access width, read from the modifiers (".64", ".128", ".U8"; none is 32 bits).

Sources: the CUDA binary utilities' instruction-set reference (Turing through Blackwell) and the
opcodes seen in the toolkit's own listings of sm_80, sm_90a and sm_100a kernels (tests pin them
on captured SASS). An opcode the table does not name is counted as "other", never dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# class -> (what it is, opcodes). Order matters only for reading.
CLASSES: dict[str, tuple[str, frozenset[str]]] = {
    "fp32": ("FP32 arithmetic, compares and min/max", frozenset({
        "FADD", "FFMA", "FMUL", "FMNMX", "FSET", "FSETP", "FSEL", "FCHK", "FSWZADD", "FADD32I",
        "FFMA32I", "FMUL32I", "FFMA2", "FADD2", "FMUL2", "FMNMX3"})),
    "fp16": ("FP16/BF16 packed arithmetic", frozenset({
        "HADD2", "HFMA2", "HMUL2", "HMNMX2", "HSET2", "HSETP2", "HADD2_32I", "HFMA2_32I",
        "HMUL2_32I"})),
    "fp64": ("FP64 arithmetic", frozenset({"DADD", "DFMA", "DMUL", "DMNMX", "DSETP", "DSET"})),
    "int": ("integer and logic", frozenset({
        "IADD", "IADD3", "IADD32I", "IMAD", "IMAD32I", "IMADSP", "IMUL", "IMUL32I", "IMNMX",
        "IABS", "ISETP", "ISET", "ISCADD", "ISCADD32I", "LEA", "LOP", "LOP3", "LOP32I", "SHF",
        "SHL", "SHR", "POPC", "FLO", "BREV", "BMSK", "PRMT", "SEL", "VABSDIFF", "VABSDIFF4",
        "IDP", "IDP4A", "IDP2A", "VIADD", "VIMNMX", "VIMNMX3", "IMNMX3", "I2I", "I2IP"})),
    "convert": ("conversions between types", frozenset({
        "F2F", "F2FP", "F2I", "I2F", "I2FP", "F2IP", "FRND"})),
    "tensor": ("tensor-core matrix multiply-accumulate", frozenset({
        "HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "OMMA", "QMMA",
        "UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA"})),
    "sfu": ("special functions (reciprocal, sqrt, exp2, log2, sin, cos)", frozenset({
        "MUFU"})),
    "global_load": ("loads from global or generic memory", frozenset({
        "LDG", "LD", "LDGDEPBAR"})),
    "global_store": ("stores to global or generic memory", frozenset({"STG", "ST"})),
    "atomic": ("atomics and reductions", frozenset({
        "ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDAS"})),
    "shared_load": ("loads from shared memory", frozenset({"LDS", "LDSM"})),
    "shared_store": ("stores to shared memory", frozenset({"STS", "STSM"})),
    "local": ("local memory: spills and stack arrays", frozenset({"LDL", "STL"})),
    "async_copy": ("asynchronous and bulk copies (cp.async, TMA)", frozenset({
        "LDGSTS", "UBLKCP", "UBLKRED", "UTMALDG", "UTMASTG", "UTMAPF", "UTMAREDG", "UTMACCTL",
        "UTMACMDFLUSH", "UBLKPF"})),
    "constant": ("loads from constant memory", frozenset({"LDC", "ULDC", "LDCU"})),
    "texture": ("texture and surface access", frozenset({
        "TEX", "TLD", "TLD4", "TMML", "TXD", "TXQ", "SULD", "SUST", "SUATOM", "SURED"})),
    "shuffle": ("warp shuffles, votes and matches", frozenset({
        "SHFL", "VOTE", "VOTEU", "MATCH", "REDUX"})),
    "sync": ("barriers, fences and convergence", frozenset({
        "BAR", "BSSY", "BSYNC", "WARPSYNC", "MEMBAR", "DEPBAR", "ERRBAR", "CCTL", "CCTLL",
        "SYNCS", "ARRIVES", "FENCE", "ELECT", "NANOSLEEP", "B2R", "R2B", "BMOV", "YIELD",
        "WARPGROUP", "WARPGROUPSET", "UCGABAR_ARV", "UCGABAR_WAIT", "ACQBULK", "ACQSHMINIT"})),
    "branch": ("branches, calls and exits", frozenset({
        "BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "EXIT", "BREAK", "BPT", "KILL",
        "RTT", "ACCMD"})),
    "uniform": ("uniform datapath (one value per warp)", frozenset({
        "UIADD3", "UIMAD", "ULOP3", "ULOP", "ULOP32I", "USHF", "USEL", "UMOV", "UISETP", "ULEA",
        "UPRMT", "UFLO", "UPOPC", "UBREV", "UBMSK", "UPLOP3", "UP2UR", "UR2UP", "USETMAXREG",
        "UIMNMX", "USGXT", "UVIADD", "UVIMNMX", "UFADD", "UFFMA", "UFMUL", "UFSETP", "UFMNMX",
        "UF2F", "UI2F", "UF2I", "UF2FP", "UMEMSETS", "USTGR", "UGETNEXTWORKID",
        "UCLEA", "S2UR", "R2UR"})),
    "move": ("moves, predicates and special registers", frozenset({
        "MOV", "MOV32I", "S2R", "CS2R", "PLOP3", "P2R", "R2P", "PSETP", "PSET", "SGXT", "NOP",
        "LEPC", "GETLMEMBASE", "SETLMEMBASE", "PMTRIG", "CSMTEST"})),
}

_BY_OPCODE: dict[str, str] = {}
for _cls, (_, _ops) in CLASSES.items():
    for _op in _ops:
        _BY_OPCODE.setdefault(_op, _cls)

MEMORY = ("global_load", "global_store", "shared_load", "shared_store", "local", "atomic")
_WIDTH = re.compile(r"\.(U8|S8|U16|S16|32|64|128)\b")
_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "32": 32, "64": 64, "128": 128}


def classify(opcode: str, text: str = "") -> str:
    """The class of a base opcode ("other" for one the table does not name). ``text``, the
    whole instruction, where the operands decide: ptxas zeroes a register with
    ``HFMA2.MMA R0, -RZ, RZ, 0, 0``, a move on the FMA pipe, not FP16 work."""
    if opcode == "HFMA2" and "-RZ, RZ" in text:
        return "move"
    return _BY_OPCODE.get(opcode, "other")


def access_bits(mnemonic: str) -> int:
    """The width of a memory instruction's access in bits, from its modifiers (32 when none
    says otherwise, as nvdisasm prints a plain 32-bit LDG as "LDG.E")."""
    m = _WIDTH.findall(mnemonic.split(" ", 1)[0])
    return _WIDTHS[m[-1]] if m else 32


@dataclass(frozen=True)
class Mix:
    """Instructions per class, and for the memory classes the bytes each thread moves."""
    counts: dict[str, int]
    memory_bytes: dict[str, int]  # class -> bytes per thread over its static instructions
    opcodes: dict[str, dict[str, int]]  # class -> opcode -> count

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict:
        return {"total": self.total, "counts": self.counts, "memory_bytes": self.memory_bytes,
                "opcodes": self.opcodes}


def _strip_predicate(text: str) -> str:
    return re.sub(r"^@!?U?P[T\d]+\s+", "", text)


def mix(instructions, weights=None) -> Mix:
    """The mix of ``instructions``: anything with ``opcode`` and ``text`` (``SassInstruction``,
    ``LineInstruction``). Static counts: each instruction once, as the listing holds it; with
    ``weights`` (one per instruction: how many times it runs per thread, ``inspect.loops``),
    dynamic counts per thread, which may be fractional."""
    counts: Counter = Counter()
    by_op: dict[str, Counter] = {}
    memory: Counter = Counter()
    instructions = list(instructions)
    if weights is None:
        weights = [1] * len(instructions)
    for i, w in zip(instructions, weights, strict=True):
        cls = classify(i.opcode, i.text)
        counts[cls] += w
        by_op.setdefault(cls, Counter())[i.opcode] += w
        if cls in MEMORY:
            memory[cls] += w * (access_bits(_strip_predicate(i.text)) // 8)
    order = list(CLASSES) + ["other"]
    return Mix({c: counts[c] for c in order if counts[c]},
               {c: memory[c] for c in MEMORY if memory[c]},
               {c: dict(by_op[c].most_common()) for c in order if c in by_op})


# Floating-point operations one thread's instruction performs (an FMA is two; a packed pair
# of halves is two lanes): what a workload's declared FLOPs count.
FLOPS = {"FFMA": 2, "FFMA32I": 2, "FADD": 1, "FADD32I": 1, "FMUL": 1, "FMUL32I": 1,
         "FFMA2": 4, "FADD2": 2, "FMUL2": 2, "HFMA2": 4, "HFMA2_32I": 4, "HADD2": 2,
         "HADD2_32I": 2, "HMUL2": 2, "HMUL2_32I": 2, "DFMA": 2, "DADD": 1, "DMUL": 1}


def flops(opcode: str, text: str = "") -> int:
    """Floating-point operations per thread of one instruction (0 for anything else, and for
    ptxas's ``HFMA2.MMA R0, -RZ, RZ, 0, 0``, a move)."""
    if classify(opcode, text) == "move":
        return 0
    return FLOPS.get(opcode, 0)
