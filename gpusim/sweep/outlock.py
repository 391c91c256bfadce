"""One writer per ``--out``: a lock file held for the whole run.

The lock is ``OUT/.gpusim.lock``, held with ``fcntl.flock`` so the kernel releases it when the holder
dies (a killed run leaves a stale file, which the next run takes over). The file records the holder's
PID and start time, named in the one-line refusal a second run gets.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from .errors import ScenarioError

LOCK_NAME = ".gpusim.lock"


class OutLock:
    """Context manager: ``with OutLock(out): ...`` refuses (``ScenarioError``) while another live
    process holds ``out``; a lock file left by a dead process is taken over."""

    def __init__(self, out):
        self.out = Path(out)
        self.path = self.out / LOCK_NAME
        self.fd = None

    def acquire(self) -> "OutLock":
        if self.path.is_symlink():
            raise ScenarioError(f"--out {self.out}: {LOCK_NAME} is a symlink; remove it")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise ScenarioError(f"--out {self.out}: cannot create {LOCK_NAME}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode("utf-8", "replace").split()
            os.close(fd)
            pid = holder[0] if holder else "?"
            since = holder[1] if len(holder) > 1 else "?"
            raise ScenarioError(f"--out {self.out} is in use by another gpusim run (PID {pid}, started {since}); "
                                f"wait for it to end or choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            finally:
                os.close(self.fd)  # closing drops the flock
                self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
