"""Where points run besides this process: a local process pool, or a dask.distributed cluster.

Both take the points, the function that computes one (``point.run_point`` unless a caller passes
another) and ``on_done(index, result)``, called in this process as each point finishes so the
caller saves it at once. dask is imported only here, only when asked for.
"""
from __future__ import annotations

import signal
import sys
import time

from .errors import RunError, ScenarioError
from .point import run_point

CONNECT_TIMEOUT_S = 5
# How long a dask run waits with no worker alive before it gives up (``--dask-timeout``):
# long enough for a worker to restart after a crash, short enough that a run never hangs.
DASK_TIMEOUT_S = 60.0
# How often a dask run checks that some worker is alive while nothing finishes.
DASK_POLL_S = 1.0


class SchedulerError(ScenarioError):
    """The scheduler address is malformed or nothing that answers as a dask scheduler is there."""


# --------------------------------------------------------------------------- local process pool
def worker_init():
    """Pool workers ignore Ctrl-C (the parent stops them), take SIGTERM plainly and die with the parent (Linux)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        except Exception:
            pass


def _stop_pool(ex):
    """Cancel what has not started and kill the workers (used when the run is interrupted)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
    ex.shutdown(wait=False, cancel_futures=True)


def run_pool(points: list, jobs: int, on_done, fn=run_point) -> None:
    """Run ``points`` in a local process pool of ``jobs`` workers."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ex = ProcessPoolExecutor(max_workers=min(jobs, len(points)), initializer=worker_init)
    lost, why = 0, ""
    try:
        futs = {ex.submit(fn, pt): j for j, pt in enumerate(points)}
        for f in as_completed(futs):
            try:
                res = f.result()
            except BrokenProcessPool:
                lost += 1
                why = "a worker process died (killed, out of memory or crashed)"
                continue
            except Exception as e:
                lost += 1
                why = f"{type(e).__name__}: {e}".splitlines()[0]
                continue
            on_done(futs[f], res)
    except BaseException:
        _stop_pool(ex)
        raise
    ex.shutdown(wait=True)
    if lost:
        raise RunError(f"{why}; {lost} point(s) were not computed, every finished point is saved; "
                       f"re-run the same command to compute the rest (--jobs 1 isolates a crashing point)")


# --------------------------------------------------------------------------- dask
def _probe(address: str, timeout: float) -> None:
    """Ask the address for its identity, raising SchedulerError with one line if that fails.

    Done before creating a ``Client``: a Client whose connection failed reports again, with a
    traceback, when it is garbage-collected."""
    import asyncio

    from distributed.core import rpc

    async def identity():
        async with rpc(address, timeout=timeout) as r:
            return await asyncio.wait_for(r.identity(), timeout)

    try:
        ident = asyncio.run(identity())
    except ValueError as e:
        raise SchedulerError(f"--scheduler {address!r}: not a scheduler address ({e}); "
                             f"expected e.g. tcp://HOST:8786") from None
    except (OSError, asyncio.TimeoutError) as e:
        detail = str(e).splitlines()[0] if str(e) else "no answer"
        raise SchedulerError(f"--scheduler {address}: cannot connect within {timeout} s ({detail}); "
                             f"is the scheduler running?") from None
    except Exception as e:
        raise SchedulerError(f"--scheduler {address}: no dask scheduler answered there "
                             f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if not isinstance(ident, dict) or ident.get("type") != "Scheduler":
        kind = ident.get("type") if isinstance(ident, dict) else type(ident).__name__
        raise SchedulerError(f"--scheduler {address}: that is a dask {kind}, not a scheduler; "
                             f"give the scheduler's address")


def check_scheduler(address: str | None, timeout: float | None = None) -> float:
    """Fail early, with one line, unless dask is installed and a scheduler answers at ``address``.

    Returns the connect timeout used."""
    if not address:
        raise SchedulerError("--executor dask needs --scheduler ADDRESS (e.g. tcp://HOST:8786)")
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        raise SchedulerError("--executor dask needs dask.distributed: pip install 'gpusim[dask]'")
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    _probe(address, timeout)
    return timeout


def run_dask(points: list, scheduler_address: str | None, on_done, timeout: float | None = None,
             no_worker_timeout: float = DASK_TIMEOUT_S, fn=run_point) -> None:
    """Run ``points`` on the dask cluster at ``scheduler_address``.

    Tasks lost to the cluster (e.g. a worker killed repeatedly) are counted; after every other
    point has been handed back, ``RunError`` reports them. When no worker has been alive for
    ``no_worker_timeout`` seconds, the run stops with ``RunError`` instead of waiting forever."""
    timeout = check_scheduler(scheduler_address, timeout)
    from distributed import Client, as_completed

    try:
        client = Client(scheduler_address, timeout=timeout, set_as_default=False)
    except Exception as e:
        raise SchedulerError(f"--scheduler {scheduler_address}: cannot connect ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''})") from None
    lost, why = 0, ""
    try:
        futures = [client.submit(fn, pt, pure=False) for pt in points]
        index = {f.key: j for j, f in enumerate(futures)}
        pending = as_completed(futures, loop=client.loop)
        alive_at = checked_at = time.monotonic()
        while not pending.is_empty():
            done = pending.next_batch(block=False) if pending.has_ready() else []
            if not done:
                time.sleep(0.05)      # short enough not to delay saving, long enough to cost nothing
            for f in done:
                try:
                    res = f.result()
                except Exception as e:
                    lost += 1
                    why = f"{type(e).__name__}: {e}".splitlines()[0]
                    continue
                finally:
                    f.release()
                on_done(index[f.key], res)
            now = time.monotonic()
            if done:
                alive_at = now
            elif now - checked_at >= DASK_POLL_S:
                checked_at = now
                if client.nthreads():
                    alive_at = now
                elif now - alive_at > no_worker_timeout:
                    raise RunError(f"dask: no worker alive at {scheduler_address} for {no_worker_timeout:g} s "
                                   f"(--dask-timeout); {pending.count()} point(s) were not computed, every "
                                   f"finished point is saved; start workers and re-run the same command")
    finally:
        client.close()
    if lost:
        raise RunError(f"dask: {why}; {lost} point(s) were not computed, every finished point is saved; "
                       f"re-run the same command to compute the rest")
