"""Record many points on a GPU in one call: prepare ahead on the CPU cores, time back to back.

Worker processes take the points in the order they will be timed (at most ``--ahead`` in flight):
each compiles the point's Triton kernels for this GPU (``JITFunction.warmup`` with the arguments'
dtypes: no launch, so nothing runs on the GPU beside the timing) into Triton's on-disk cache, draws
its inputs (``numpy_exec.random_inputs``, seed 1) and computes the float64 reference of its outputs
(``measure.sampled_reference``: the whole output, or sampled rows of large ones), pickled to a
scratch file. The main process, alone on the GPU, takes each point in turn: one run whose outputs
are checked against that reference, then ``triton.testing.do_bench`` of the whole workload on the
same memory (warmup 25 ms, rep 100 ms, median; it clears the L2 before every repetition) while the
workers are stopped (SIGSTOP): a workload of several short launches is otherwise timed with the
launching thread's waits for a core (a 3-launch elementwise chain of 40K elements at 37 us for 10). A point
whose check fails keeps no time. attention_flash_bwd draws its inputs on the GPU (its forward
pass) and a worker checks its outputs while the next points are timed. One JSON line per point is
appended to ``OUT/measured.jsonl`` as soon as it is checked, so a killed run keeps what it measured.

Order: the sealed held-out scenarios first, then the training scenarios round-robin (a run cut by
its budget still covers every family). ``--skip FILE`` leaves out the points already in FILE.
``--cpu`` lets numpy execution stand in for the GPU (its wall time as the "measurement"), to test
the recorder on a machine without one.

usage: python benchmarks/record_points.py --out DIR --budget-s SECONDS [--jobs N] [--ahead 32]
                                          [--skip measured.jsonl] [--cpu] SCENARIO.yaml ...
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.sweep.scenario import load_scenario  # noqa: E402


def point_list(paths: list) -> list:
    """[(scenario, set, index, kernel, params)] held-out first, then training round-robin."""
    held, train = [], []
    for p in paths:
        rel = str(Path(p).resolve().relative_to(ROOT))
        sc = load_scenario(p)
        kind = "heldout" if "/heldout/" in rel else "train"
        pts = [(rel, kind, i, pt.kernel, dict(pt.params)) for i, pt in enumerate(sc.points)]
        (held if kind == "heldout" else train).append(pts)
    rr = [x for grp in itertools.zip_longest(*train) for x in grp if x is not None]
    return [x for grp in held for x in grp] + rr


TIMING = "triton.testing.do_bench median (warmup 25 ms, rep 100 ms), one input set, preparing workers stopped"
FORCE_SAMPLE = ("attention_flash", "attention_naive", "attention_flash_bwd", "attention_decode", "matmul")


def bwd_inputs(wl) -> dict:
    """attention_flash_bwd's inputs drawn on the GPU: normal Q, K, V, dO and the O and L = logsumexp
    that the forward pass computes from them (fp32 on the GPU, head by head), as numpy arrays. The
    check uses these O and L, so it stays exact; the kernel's own generator computes them in float64
    on the host, which takes seconds a point."""
    import numpy as np
    import torch

    from gpusim.backends.numpy_exec import to_dtype

    g = torch.Generator(device="cuda").manual_seed(1)
    t = wl.tensors
    x = {n: torch.randn(t[n].shape, generator=g, device="cuda", dtype=torch.float32) for n in ("q", "k", "v", "do")}
    x = {n: torch.from_numpy(to_dtype(v.cpu().numpy(), t[n].dtype).astype(np.float32)).cuda() for n, v in x.items()}
    q, k, v = x["q"], x["k"], x["v"]
    bh, n, d = q.shape
    o, lse = torch.empty_like(q), torch.empty(bh, n, device="cuda")
    mask = torch.ones(n, n, device="cuda", dtype=torch.bool).tril() if wl.params["causal"] else None
    for h in range(bh):
        s = q[h] @ k[h].T / d ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        lse[h] = torch.logsumexp(s, dim=-1)
        o[h] = torch.softmax(s, dim=-1) @ v[h]
    out = {nm: x[nm].cpu().numpy() for nm in ("q", "k", "v", "do")}
    out["o"] = to_dtype(o.cpu().numpy(), t["o"].dtype)
    out["lse"] = lse.cpu().numpy().astype(np.float32)
    return out


def _compile_kernels(wl) -> None:
    """Compile every launch of ``wl`` for this GPU into Triton's cache (no launch)."""
    from gpusim.backends.triton.run import _torch_dtype, load_kernel
    from gpusim.toolchain.lower import kernel_name, launch_stages, lower

    for launch in wl.launches:
        prog = launch.program
        kern = load_kernel(lower(prog, launch.grid), kernel_name(prog))
        args = [_torch_dtype(wl.tensors[launch.bindings[t.name]].dtype) for t in prog.params]
        kern.warmup(*args, grid=tuple(launch.grid), num_warps=prog.num_warps, num_stages=launch_stages(prog))


def _prepare(job) -> dict:
    """In a worker: compile the point's kernels, draw its inputs and compute the float64 reference of
    its outputs, pickled to one file that the timing process reads. attention_flash_bwd's inputs come
    from its forward pass on the GPU (``bwd_inputs``): the timing process draws them and the check runs
    later (``_late_check``). Never raises: errors go in the answer."""
    item, tmp, compile_, n = job
    rel, _, i, kernel, params = item
    ans = {"key": [rel, i], "n": n, "compile_s": 0.0, "prep_s": 0.0, "path": None, "error": ""}
    t0 = time.time()
    try:
        from gpusim import kernels
        from gpusim.backends import numpy_exec
        from gpusim.hw.validate.measure import sampled_reference

        wl = kernels.build(kernel, params)
        if compile_:
            _compile_kernels(wl)
        ans["compile_s"] = round(time.time() - t0, 2)
        if kernel != "attention_flash_bwd":
            inputs = numpy_exec.random_inputs(wl, 1)
            refs, how = sampled_reference(wl, inputs, force_sample=kernel in FORCE_SAMPLE)
            path = Path(tmp) / f"{n}.pkl"
            with open(path, "wb") as f:
                pickle.dump((inputs, refs, how), f, protocol=pickle.HIGHEST_PROTOCOL)
            ans["path"] = str(path)
    except Exception as e:       # recorded; the timing process reports it for the point
        ans["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    ans["prep_s"] = round(time.time() - t0 - ans["compile_s"], 2)
    return ans


def _late_check(job) -> tuple:
    """In a worker: (worst max_rel_err, "full" | "sampled") of outputs the timing process pickled."""
    path, kernel, params = job
    try:
        from gpusim import kernels
        from gpusim.hw.validate.measure import reference_error, sampled_reference

        with open(path, "rb") as f:
            inputs, outs = pickle.load(f)
        refs, how = sampled_reference(kernels.build(kernel, params), inputs, force_sample=kernel in FORCE_SAMPLE)
        return reference_error(refs, outs), how, ""
    except Exception as e:
        return None, None, f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        Path(path).unlink(missing_ok=True)


def _run_and_bench(wl, inputs: dict, names, quiet=contextlib.nullcontext) -> tuple:
    """({output name: numpy}, median µs): one checked run, then ``do_bench`` on the same memory, inside
    ``quiet()`` (the preparing workers stopped)."""
    from triton.testing import do_bench

    from gpusim.backends.triton import run as tb

    mem = tb.allocate(wl, inputs, "cuda")
    fns = tb.launchers(wl, mem)

    def whole():
        for _, g in fns:
            g()

    whole()
    import torch

    torch.cuda.synchronize()
    outs = {n: tb._to_numpy(mem[n], wl.tensors[n]) for n in names}
    with quiet():
        us = 1000.0 * float(do_bench(whole, warmup=25, rep=100, return_mode="median"))
    del mem, fns
    return outs, us


def _run_on_cpu(wl, inputs: dict, names, quiet=contextlib.nullcontext) -> tuple:
    """The ``--cpu`` stand-in of ``_run_and_bench`` (tests the recorder without a GPU): numpy
    execution, its wall time as the 'measurement'."""
    from gpusim.backends import numpy_exec

    with quiet():
        t0 = time.perf_counter()
        outs = numpy_exec.execute(wl, inputs)
        us = 1e6 * (time.perf_counter() - t0)
    return {n: outs[n] for n in names}, us


def measure(item, prep: dict, env: dict, tmp: str, cpu: bool = False, quiet=contextlib.nullcontext) -> tuple:
    """(record, late-check job or None) of one prepared point; ``quiet``: what the timing runs inside
    (``Recorder.quiet``: the workers stopped)."""
    from gpusim import kernels
    from gpusim.hw.validate.measure import free_gpu_memory, reference_error, tolerance

    rel, kind, i, kernel, params = item
    rec = {"scenario": rel, "set": kind, "point": i, "kernel": kernel, "params": params, **env,
           "timing_method": TIMING,
           "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": "ok", "reason": "",
           "tolerance": tolerance(params)}
    t0, late = time.time(), None
    try:
        if prep["error"]:
            raise RuntimeError(prep["error"])
        wl = kernels.build(kernel, params)
        run = _run_on_cpu if cpu else _run_and_bench
        if prep["path"] is None:             # attention_flash_bwd: inputs from the GPU, checked later
            from gpusim.backends import numpy_exec

            inputs = numpy_exec.random_inputs(wl, 1) if cpu else bwd_inputs(wl)
            outs, us = run(wl, inputs, list(wl.outputs), quiet)
            path = Path(tmp) / f"late_{prep['n']}.pkl"
            with open(path, "wb") as f:
                pickle.dump((inputs, outs), f, protocol=pickle.HIGHEST_PROTOCOL)
            rec["measured_us"], late = us, (str(path), kernel, params)
        else:
            with open(prep["path"], "rb") as f:
                inputs, refs, how = pickle.load(f)
            Path(prep["path"]).unlink(missing_ok=True)
            outs, us = run(wl, inputs, list(refs), quiet)
            rec["measured_us"] = us
            _set_check(rec, reference_error(refs, outs), how, "")
    except Exception as e:
        rec.update(status="gpu-error", reason=f"{type(e).__name__}: {str(e)[:300]}")
        rec.pop("measured_us", None)
    if not cpu:
        free_gpu_memory()
    rec["wall_s"] = round(time.time() - t0, 3)
    return rec, late


def _set_check(rec: dict, err, how, error: str) -> None:
    """The check's verdict on a record: a wrong result keeps no time."""
    if error:
        rec.update(status="check-error", reason=error)
        rec.pop("measured_us", None)
        return
    rec.update(max_rel_err=err, check=how)
    if not err <= rec["tolerance"]:
        rec.update(status="wrong-result", reason=f"max_rel_err {err:.3g} > {rec['tolerance']:g} ({how} check)")
        rec.pop("measured_us", None)


def environment(cpu: bool = False) -> dict:
    if cpu:
        return {"device": "cpu (numpy stand-in)", "triton": "", "torch": "", "cuda": ""}
    import torch
    import triton

    return {"device": torch.cuda.get_device_name(0), "triton": triton.__version__, "torch": torch.__version__,
            "cuda": str(torch.version.cuda)}


def _scratch() -> str:
    """A scratch folder for the pickled inputs: /dev/shm when it has room (8 GiB free), else /tmp."""
    import shutil
    import tempfile

    base = "/dev/shm" if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > 8 << 30 else None
    return tempfile.mkdtemp(prefix="record_points_", dir=base)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (Linux /proc; True where that cannot be read)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "Tt"
    except (OSError, IndexError):
        return True


class Recorder:
    """Prepares points ahead in a worker pool (at most ``ahead`` in flight), times them in order
    and writes each record as soon as its check is done."""

    def __init__(self, items, out: Path, jobs: int, ahead: int, cpu: bool):
        self.items, self.out, self.cpu, self.ahead = iter(items), out, cpu, ahead
        self.tmp = _scratch()
        # a workload of several launches is timed from the first launch to the end of the last, so
        # time the launching thread waits for a core adds to it: the workers run at a lower priority
        # and are stopped while a point is timed (``quiet``)
        self.pool = mp.get_context("spawn").Pool(jobs, initializer=os.nice, initargs=(10,))
        self.pending, self.late = [], []
        self.env = environment(cpu)
        self.n = self.n_ok = self.n_sent = 0

    @contextlib.contextmanager
    def quiet(self):
        """The pool's workers stopped (SIGSTOP) for the duration, continued (SIGCONT) after."""
        pids = [w.pid for w in getattr(self.pool, "_pool", ()) if w.pid and w.is_alive()]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        t_end = time.time() + 2.0              # the signal is asynchronous: wait until each one has stopped
        while time.time() < t_end and not all(_stopped(pid) for pid in pids):
            time.sleep(0.001)
        try:
            yield
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def _top_up(self):
        while len(self.pending) < self.ahead:
            item = next(self.items, None)
            if item is None:
                return
            job = (item, self.tmp, not self.cpu, self.n_sent)
            self.n_sent += 1
            self.pending.append((item, self.pool.apply_async(_prepare, (job,))))

    def _write(self, f, rec):
        f.write(json.dumps(rec) + "\n")
        f.flush()
        self.n += 1
        self.n_ok += rec["status"] == "ok"

    def _drain_late(self, f, wait_s: float = 0.0):
        t_end = time.time() + wait_s
        for entry in list(self.late):
            rec, res = entry
            if not res.ready() and wait_s > 0:
                res.wait(max(0.0, t_end - time.time()))
            if res.ready():
                _set_check(rec, *res.get())
                self._write(f, rec)
                self.late.remove(entry)

    def run(self, budget_s: float, t_start: float) -> None:
        with open(self.out / "measured.jsonl", "a") as f, open(self.out / "compile.jsonl", "a") as fc:
            self._top_up()
            while self.pending:
                if time.time() - t_start > budget_s:
                    print(f"record_points: budget reached after {self.n + len(self.late)} points", flush=True)
                    break
                item, res = self.pending.pop(0)
                try:
                    prep = res.get(timeout=600)
                except mp.TimeoutError:
                    prep = {"key": [item[0], item[2]], "path": None, "error": "preparing took over 600 s"}
                self._top_up()
                fc.write(json.dumps(prep) + "\n")
                rec, late = measure(item, prep, self.env, self.tmp, self.cpu, self.quiet)
                if late is None:
                    self._write(f, rec)
                else:
                    self.late.append((rec, self.pool.apply_async(_late_check, (late,))))
                self._drain_late(f)
                if self.n + len(self.late) == 20 and self.n_ok == 0 and not self.late:
                    print("record_points: the first 20 points all failed; stopping (see measured.jsonl)", flush=True)
                    break
                if (self.n + len(self.late)) % 50 == 0:
                    print(f"  {self.n + len(self.late)} points ({self.n_ok} ok) in {time.time() - t_start:.0f} s",
                          flush=True)
            self._drain_late(f, wait_s=120.0)
        self.pool.terminate()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, required=True, help="stop starting points after this many seconds")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                    help="worker processes that compile and prepare points ahead")
    ap.add_argument("--ahead", type=int, default=32, help="points prepared ahead at most")
    ap.add_argument("--skip", default=None, help="a measured.jsonl whose points are left out")
    ap.add_argument("--cpu", action="store_true", help="no GPU: numpy execution stands in (tests the recorder)")
    a = ap.parse_args(argv)
    t_start = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items = point_list(a.scenarios)
    if a.skip and Path(a.skip).exists():
        done = {(r["scenario"], r["point"]) for r in map(json.loads, Path(a.skip).read_text().splitlines())}
        items = [x for x in items if (x[0], x[2]) not in done]
    print(f"record_points: {len(items)} points, budget {a.budget_s:.0f} s, {a.jobs} workers", flush=True)
    rec = Recorder(items, out, a.jobs, a.ahead, a.cpu)
    rec.run(a.budget_s, t_start)
    print(f"record_points: {rec.n} points measured ({rec.n_ok} ok) in {time.time() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
