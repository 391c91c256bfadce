"""Progress of a run on stderr: a tqdm bar on a terminal; elsewhere (a log file, CI) one line
each time another 10% of the points has finished, so logs stay short and readable."""
from __future__ import annotations

import sys
import time

from tqdm import tqdm

LINE_STEP = 0.10   # off a terminal, a line per this fraction of the points


class Progress:
    """``enabled``: None = a bar on a terminal, lines elsewhere; True = always the bar; False = silent."""

    def __init__(self, total: int, enabled: bool | None = None, cached: int = 0, stream=None, what: str = ""):
        self.total, self.done, self.cached, self.what = total, 0, cached, what
        self.stream = stream if stream is not None else sys.stderr
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.mode = "off" if enabled is False or total <= 0 else ("bar" if enabled or tty else "lines")
        self.t0 = time.monotonic()
        self._next_line = LINE_STEP
        self._bar = None
        if self.mode == "bar":
            self._bar = tqdm(total=total, file=self.stream, unit="point", desc=f"gpusim{what}", mininterval=0.1,
                             dynamic_ncols=True, leave=True)
            if cached:
                self._bar.set_postfix_str(f"+{cached} saved")

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def update(self, n: int = 1):
        self.done += n
        if self.mode == "bar":
            self._bar.update(n)
        elif self.mode == "lines" and self.done >= self._next_line * self.total - 1e-9:
            while self._next_line * self.total <= self.done + 1e-9:
                self._next_line += LINE_STEP
            el = time.monotonic() - self.t0
            rate = self.done / el if el > 0 else 0.0
            left = tqdm.format_interval((self.total - self.done) / rate) if rate else "?"
            saved = f" (+{self.cached} saved)" if self.cached else ""
            self.stream.write(f"gpusim{self.what}: {self.done}/{self.total} points{saved} ({self.done / self.total:.0%}) "
                              f"in {tqdm.format_interval(el)}, {rate:.2f} points/s, {left} left\n")
            self.stream.flush()

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
