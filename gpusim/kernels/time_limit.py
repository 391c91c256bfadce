"""A time limit on running a kernel file's own code: importing the file and calling a kernel's
builder. An endless loop there ends with one line naming the file, the line it was at and the
limit, instead of hanging ``gpusim run`` or ``gpusim kernels``.

The limit is ``$GPUSIM_KERNEL_TIME_LIMIT`` seconds (default 60; 0 turns it off). It is a SIGALRM
timer, so it holds on the main thread of a Unix process (the command line, and each worker
process of a local run); elsewhere (a thread of a dask worker, Windows) the code runs unlimited.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

TIME_LIMIT_ENV = "GPUSIM_KERNEL_TIME_LIMIT"
DEFAULT_TIME_LIMIT_S = 60.0


class TimeLimitError(TimeoutError):
    """A kernel file's code ran past the time limit (the message says what and how to allow more)."""


class _Alarm(BaseException):
    """Raised by the timer inside user code (its argument: the ``file:line`` it stopped at); a
    BaseException, so ``except Exception`` there cannot swallow it. ``time_limit`` turns it into a
    ``TimeLimitError``."""


def limit_seconds() -> float:
    """``$GPUSIM_KERNEL_TIME_LIMIT`` as seconds (0: no limit); a ValueError names a bad value."""
    text = os.environ.get(TIME_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_TIME_LIMIT_S
    try:
        s = float(text)
    except ValueError:
        s = -1.0
    if not s >= 0 or s == float("inf"):
        raise ValueError(f"{TIME_LIMIT_ENV}={text!r}: expected a number of seconds >= 0 (0 turns the limit off)")
    return s


def _on_alarm(signum, frame):
    where = "?"
    if frame is not None:
        try:
            where = f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"
        except ValueError:
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    raise _Alarm(where)


@contextmanager
def time_limit(what: str):
    """Run the block with the time limit; past it, ``TimeLimitError`` saying ``what`` ran too long.
    Inside another limit that ends sooner, the outer one stands."""
    seconds = limit_seconds()
    usable = (seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    outer = signal.getitimer(signal.ITIMER_REAL)[0] if usable else 0.0
    if not usable or (outer and outer <= seconds):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)     # repeats: a bare except: cannot end it for good
    start = time.monotonic()
    try:
        yield
    except _Alarm as stop:
        raise TimeLimitError(f"{what} ran longer than the limit of {seconds:g} s (stopped at {stop.args[0]}: "
                             f"an endless loop?); set {TIME_LIMIT_ENV}=SECONDS to allow more, 0 for none") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:            # a longer timer of the caller's goes on with what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))
