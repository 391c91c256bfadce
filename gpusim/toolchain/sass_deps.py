"""The register dependencies of a compiled kernel's loop bodies, read from ``nvdisasm -c`` output.

Each loop (a backward ``BRA`` and its target label) becomes a tuple of instructions, each written
``"OPCODE.MODS|dst dst|src src"`` with registers spelled as nvdisasm prints them (``R12``, ``UR5``,
``P0``, ``UP1``; the constants ``RZ``, ``URZ``, ``PT``, ``UPT`` are left out). A register that an
instruction reads or writes as a vector is listed once per 32-bit register it covers (``LDS.128
R4`` writes R4..R7; ``R12.64`` in an address reads R12, R13; ``HGMMA.64x64x16.F32 R152`` writes the
32 accumulator registers R152..R183). The guard predicate (``@P0``) is a source. The timing model
(``backends/sim/warp.py``) schedules these bodies to find how long one warp's iteration takes
when its instructions wait for the results they use.
"""
from __future__ import annotations

import re

_LINE = re.compile(r"^\s+/\*([0-9a-f]+)\*/\s+(@!?(U?P\w+)\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\s*(.*?)\s*;")
_LABEL = re.compile(r"^(\.L\w+):")
_BRANCH = re.compile(r"`\((\.L\w+)\)")
_REG = re.compile(r"(?<![\w.])(U?R\d+|U?P\d+)((?:\.64|\.128)?)")
# instructions whose register operands are all read (nothing written to a register)
_NO_DEST = ("ST", "STS", "STG", "STL", "RED", "BAR", "BRA", "EXIT", "MEMBAR", "FENCE", "WARPGROUP", "DEPBAR",
            "LDGSTS", "LDGDEPBAR", "NOP", "ARRIVES", "SYNCS", "UTMALDG", "UTMASTG", "ERRBAR", "CCTL", "WARPSYNC",
            "BSYNC", "BSSY", "RET", "CALL", "YIELD")
_HGMMA = re.compile(r"^\.(\d+)x(\d+)x(\d+)")


def _width(op: str, mods: str) -> int:
    """32-bit registers an instruction's destination covers."""
    if op == "HGMMA":
        m = _HGMMA.match(mods)
        n = int(m.group(2)) if m else 8
        return max(1, n // 2 if ".F32" in mods else n // 4)
    if op == "HMMA":
        return 4 if ".F32" in mods else 2
    if op == "LDSM":
        return int(mods[-1]) if mods[-1:].isdigit() else 1
    if ".128" in mods:
        return 4
    if ".64" in mods or "WIDE" in mods:
        return 2
    return 1


def _regs(token: str, width: int = 1) -> list:
    out = []
    for name, vec in _REG.findall(token):
        w = {".64": 2, ".128": 4}.get(vec, width)
        if name.startswith(("R", "UR")) and w > 1:
            base = name.rstrip("0123456789")
            num = int(name[len(base):])
            out += [f"{base}{num + k}" for k in range(w)]
        else:
            out.append(name)
    return out


def instruction(op: str, mods: str, operands: str, guard: str | None) -> str:
    """One instruction as ``"OP.MODS|dsts|srcs"``."""
    ops = [o.strip() for o in operands.split(",")] if operands else []
    dst, i = [], 0
    if op not in _NO_DEST and not op.startswith(("ST", "BAR")):
        while i < len(ops) and re.fullmatch(r"!?U?P(\d+|T)", ops[i]):
            dst += _regs(ops[i])
            i += 1
        if "SETP" not in op and op not in ("PLOP3", "UPLOP3") and i < len(ops):
            dst += _regs(ops[i], _width(op, mods))
            i += 1
    src = [] if guard is None else _regs(guard)
    rest = ops[i:]
    for k, o in enumerate(rest):
        w = 1
        if op in ("STS", "STG", "STL", "ST") and k == len(rest) - 1:
            w = _width(op, mods)       # the stored value
        elif op in ("HGMMA", "HMMA") and dst and o == dst[0]:
            src += dst                 # the accumulator it adds to
            continue
        elif op in ("HGMMA", "HMMA") and o.startswith("R"):
            w = 4 if op == "HGMMA" or k == 0 else 2     # A fragment (4 registers), HMMA's B (2)
        src += _regs(o, w)
    return f"{op}{mods}|{' '.join(dst)}|{' '.join(src)}"


def scan(text: str) -> tuple:
    """(instructions, loops) of an nvdisasm listing: each instruction as (address, guard predicate or
    None, opcode, modifiers, operands), each loop as the (first, last) address of a backward ``BRA``
    and its target label."""
    instrs, labels, pending = [], {}, []
    for line in text.splitlines():
        lm = _LABEL.match(line)
        if lm:
            pending.append(lm.group(1))
            continue
        m = _LINE.match(line)
        if m:
            addr = int(m.group(1), 16)
            for lab in pending:
                labels[lab] = addr
            pending = []
            instrs.append((addr, m.group(3), m.group(4), m.group(5), m.group(6)))
    loops = []
    for addr, _, op, _, rest in instrs:
        b = _BRANCH.search(rest)
        if op == "BRA" and b and b.group(1) in labels and labels[b.group(1)] < addr:
            loops.append((labels[b.group(1)], addr))
    return instrs, loops


def loop_bodies(text: str, scanned: tuple | None = None) -> tuple:
    """Every loop body of the disassembly, innermost ranges as nvdisasm lays them out
    (``scanned``: ``scan(text)`` when the caller has it already)."""
    instrs, loops = scanned or scan(text)
    return tuple(tuple(instruction(o, mods, rest, g) for a, g, o, mods, rest in instrs if lo <= a <= hi)
                 for lo, hi in loops)


def straight_body(text: str, scanned: tuple | None = None) -> tuple:
    """The instructions outside every loop, in program order: what one CTA's warps issue once (a
    row kernel's single pass, a loop's prologue and epilogue)."""
    instrs, loops = scanned or scan(text)
    return tuple(instruction(o, mods, rest, g) for a, g, o, mods, rest in instrs
                 if not any(lo <= a <= hi for lo, hi in loops))
