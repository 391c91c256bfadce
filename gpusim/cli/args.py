"""What every command shares: the one-line usage error, the argument parser with one-line errors,
and the small value parsers of the options."""
from __future__ import annotations

import argparse
import os
from pathlib import Path


class UsageError(Exception):
    """A command-line mistake; main() prints it as one line and exits with code 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def check_out(out, flag: str = "--out") -> None:
    """One line (UsageError) when the output directory ``out`` cannot be made or written, before any
    work starts: it is a file, lies under a file, or its nearest existing folder is not writable.
    Nothing is created here."""
    p = Path(out)
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise UsageError(f"{flag} {out}: cannot write there: it is a file, not a directory; name a directory "
                             f"(created if missing)")
        where = p
    else:
        where = next((a for a in p.absolute().parents if a.exists()), Path("/"))
        if not where.is_dir():
            raise UsageError(f"{flag} {out}: cannot write there: {where} is a file, so no directory can be made "
                             f"under it")
    if not os.access(where, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {out}: cannot write there: {where} is not writable (permission denied); "
                         f"choose another directory")


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return x


def parse_sets(pairs):
    """``--set`` of triton-source: kernel parameters (``params.`` optional), parsed as ``run`` parses them."""
    from ..sweep.yamlio import parse_assignment

    params = {}
    for a in pairs or []:
        if "=" not in a:
            raise UsageError(f"--set {a!r}: expected NAME=VALUE, e.g. --set seq_len=1024")
        parts, val = parse_assignment(a)
        params[".".join(parts[1:] if parts[0] == "params" else parts)] = val
    return params
