"""How a GPU config file is laid out: what the part is (datasheet and driver), what was measured
on it (one microbenchmark, one value), the corrections (efficiency tables and fitted values), and,
for a config derived from another GPU, what it borrows from that GPU. Each value has its source
as a comment above it, taken from the config's ``sources``; ``sources`` itself stays in the file
as the machine-readable record. ``fitted_numbers`` counts the numbers in the corrections.

Used by ``benchmarks/derive_configs.py`` (h100, a100) and ``benchmarks/annotate_configs.py``
(rewrites every config in ``configs/`` in this layout; re-running it changes nothing).
"""
from __future__ import annotations

import textwrap

import yaml

# fields that state what the part is: datasheet, programming guide or the driver's report
DATASHEET = ("sm_count", "clock_hz", "sram_bytes_per_sm", "sram_bytes_per_cta_max", "registers_per_sm",
             "max_registers_per_thread", "compute_capability", "max_ctas_per_sm", "max_warps_per_sm", "l2_bytes",
             "l2_line_bytes", "l2_ways", "hbm_bytes", "warp_issue_per_clk_per_sm", "shuffle_lanes_per_clk_per_sm",
             "shared_bytes_per_clk_per_sm", "cp_async_min_bytes", "power_limit_w")
# fields that are one measured quantity each (a rate, a latency, an overhead)
MEASURED = ("l2_bandwidth_bytes_per_s", "l2_write_bandwidth_bytes_per_s", "l2_latency_cycles", "sm_load_bytes_per_clk",
            "hbm_read_bandwidth_bytes_per_s", "hbm_write_bandwidth_bytes_per_s", "hbm_copy_bandwidth_bytes_per_s",
            "hbm_latency_cycles", "tensor_flops_per_s", "fp32_flops_per_s", "sfu_ops_per_clk_per_sm",
            "simt_lane_ops_per_clk_per_sm", "launch_overhead_us", "sync_overhead_us", "cta_dispatch_ns",
            "warp_load_bytes_per_clk", "cta_async_fill_bytes_per_clk", "dependent_latency_cycles",
            "spill_reloads_in_flight_per_warp", "idle_power_w")
# fields that correct the first-order model: efficiency tables, fitted laws and energies
CORRECTIONS = ("tensor_tile_efficiency", "tensor_simt_overlap", "scalar_access_per_clk_per_sm", "staged_access_cost",
               "hbm_piece_efficiency", "l2_fetch_bytes", "request_latency_cycles", "l2_coalesced_fraction",
               "hbm_queue_window_cycles", "activity_energy_j", "dvfs_energy_exponent")
RECORDS = ("sources", "measurements", "provenance")
BORROWED = "same as the H200 measured on our machine: "

SECTIONS = (("datasheet and driver: what the part is", DATASHEET),
            ("measured, or derived from a measurement: one value each", MEASURED),
            ("corrections: efficiency tables and fitted values", CORRECTIONS))


def _numbers(v) -> int:
    """How many numbers a value holds (a table's entries, a list of shapes' efficiencies)."""
    if isinstance(v, dict):
        return sum(_numbers(x) for x in v.values())
    if isinstance(v, list):
        return sum(1 if not isinstance(x, dict) else (1 if "efficiency" in x else _numbers(x)) for x in v)
    return 1 if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def fitted_numbers(data: dict, own_only: bool = False) -> int:
    """Numbers in the config's corrections (``own_only``: not counting those borrowed from the H200)."""
    src = data.get("sources") or {}
    return sum(_numbers(data[f]) for f in CORRECTIONS
               if f in data and data[f] not in (None, {}, [], 0) and not (own_only and _borrowed(src.get(f, ""))))


def _borrowed(source: str) -> bool:
    """A value taken over from the H200 as it is: copied, or an estimate that is the H200's number."""
    s = str(source)
    return s.startswith(BORROWED) or (s.startswith("E:") and "H200" in s)


def _comment(source: str) -> str:
    lines = textwrap.wrap(str(source), 110) or ["(no source)"]
    return "".join(f"# {x}\n" for x in lines)


def _field(name: str, value, source: str | None) -> str:
    body = yaml.safe_dump({name: value}, sort_keys=False, width=120, allow_unicode=True,
                          default_flow_style=None if isinstance(value, list) else False)
    if isinstance(value, dict) and value and all(not isinstance(x, (dict, list)) for x in value.values()):
        body = yaml.safe_dump({name: value}, sort_keys=False, width=120, default_flow_style=True)[1:-2] + "\n"
    src = source[len(BORROWED):] if source and _borrowed(source) else source
    return (_comment(src) if src else "") + body


def header_of(text: str) -> str:
    """The comment lines a config file opens with (kept as they are when it is laid out again)."""
    lines = []
    for ln in text.splitlines(keepends=True):
        if not ln.startswith("#"):
            break
        lines.append(ln)
    return "".join(lines)


def dump_config(data: dict, header: str = "") -> str:
    """The config ``data`` (a GPUConfig's model_dump) as YAML text in the sectioned layout."""
    src = data.get("sources") or {}
    first = {k: data[k] for k in ("name", "description") if k in data}
    out = [header, yaml.safe_dump(first, sort_keys=False, width=120, allow_unicode=True)]
    placed = set(first) | set(RECORDS)
    borrowed = [f for _, fs in SECTIONS for f in fs if f in data and _borrowed(src.get(f, ""))]
    for title, fields in SECTIONS:
        own = [f for f in fields if f in data and f not in borrowed]
        if own:
            n = f" ({fitted_numbers({f: data[f] for f in own})} numbers)" if fields is CORRECTIONS else ""
            out.append(f"\n# ==== {title}{n} ====\n")
            out += [_field(f, data[f], src.get(f)) for f in own]
        placed |= set(own)
    if borrowed:
        out.append(f"\n# ==== borrowed from the H200 measured on our machine: nothing was measured on this part "
                   f"({len(borrowed)} fields, {fitted_numbers({f: data[f] for f in borrowed})} fitted numbers) ====\n")
        out += [_field(f, data[f], src.get(f)) for f in borrowed]
        placed |= set(borrowed)
    rest = [f for f in data if f not in placed]
    if rest:
        out.append("\n# ==== other ====\n")
        out += [_field(f, data[f], src.get(f)) for f in rest]
    recs = {k: data[k] for k in RECORDS if data.get(k)}
    if recs:
        out.append("\n# ==== records: every value's source, the raw measurements, where they were taken ====\n")
        out.append(yaml.safe_dump(recs, sort_keys=False, width=120, allow_unicode=True))
    return "".join(out)
