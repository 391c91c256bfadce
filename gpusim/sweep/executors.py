"""Executors other than the local process pool: running scenario points on a dask.distributed cluster.

``run_dask`` connects to an existing scheduler, submits one task per point and hands each result
back in the client process as it completes, so the caller saves points as they finish, exactly
as with the local pool. dask is imported only here, only when asked for.
"""
from __future__ import annotations

from .scenario import RunError, ScenarioError, run_point

CONNECT_TIMEOUT_S = 5


class SchedulerError(ScenarioError):
    """The scheduler address is malformed or nothing that answers as a dask scheduler is there."""


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


def run_dask(points: list, scheduler_address: str | None, on_done, timeout: float | None = None) -> None:
    """Run ``points`` on the dask cluster at ``scheduler_address``.

    ``on_done(index, result_tuple)`` is called in this process as each point's future completes.
    Tasks lost to the cluster (e.g. a worker killed repeatedly) are counted; after every other
    point has been handed back, ``RunError`` reports them."""
    timeout = check_scheduler(scheduler_address, timeout)
    from distributed import Client, as_completed

    try:
        client = Client(scheduler_address, timeout=timeout, set_as_default=False)
    except Exception as e:
        raise SchedulerError(f"--scheduler {scheduler_address}: cannot connect ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''})") from None
    lost, why = 0, ""
    try:
        futures = [client.submit(run_point, pt, pure=False) for pt in points]
        index = {f.key: j for j, f in enumerate(futures)}
        for f in as_completed(futures, loop=client.loop):
            try:
                res = f.result()
            except Exception as e:
                lost += 1
                why = f"{type(e).__name__}: {e}".splitlines()[0]
                continue
            finally:
                f.release()
            on_done(index[f.key], res)
    finally:
        client.close()
    if lost:
        raise RunError(f"dask: {why}; {lost} point(s) were not computed, every finished point is saved; "
                       f"re-run the same command to compute the rest")
