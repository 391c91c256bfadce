"""Lay every GPU config in configs/ out in sections (datasheet, measured, corrections, borrowed from
the H200), each value under its source (gpusim/hw/config_yaml.py), and print the count of fitted
numbers per config. The loaded values do not change: each config's hash is checked before and after.

usage: python benchmarks/annotate_configs.py [--check]   (--check: exit 1 if a file is not laid out)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hardware import GPUConfig  # noqa: E402
from gpusim.hw.config_yaml import dump_config, fitted_numbers, header_of  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    bad = 0
    print(f"{'config':18s} {'fitted numbers':>14s} {'own':>5s}")
    for p in sorted((ROOT / "configs").glob("*.yaml")):
        text = p.read_text()
        data = yaml.safe_load(text)
        new = dump_config(data, header_of(text))
        if GPUConfig.model_validate(yaml.safe_load(new)).config_hash() != GPUConfig.model_validate(data).config_hash():
            raise SystemExit(f"{p.name}: the layout changed a value")
        print(f"{p.stem:18s} {fitted_numbers(data):14d} {fitted_numbers(data, own_only=True):5d}")
        if new != text:
            bad += 1
            if not a.check:
                p.write_text(new)
    if a.check and bad:
        print(f"{bad} config(s) not laid out: run python benchmarks/annotate_configs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
