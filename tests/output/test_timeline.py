"""gpusim.timeline: Chrome trace structure, nesting, bandwidth counters and the Gantt chart."""
import json

import pytest

import gpusim
from gpusim.output import timeline
from gpusim.result import CTAEvent, OpEvent, TransferEvent

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", params=["attention_flash", "attention_naive"])
def result(request):
    return gpusim.simulate(request.param, "h100", batch=1, heads=2, seq_len=512, timeline=True, check=False)


@pytest.fixture(scope="module")
def written(result, tmp_path_factory):
    out = tmp_path_factory.mktemp("tl")
    paths = timeline.write_timeline(result, out)
    return paths, json.loads((out / "timeline.json").read_text())


def test_files(written):
    (jpath, png), doc = written
    assert jpath.name == "timeline.json" and png.name == "timeline.png"
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert doc["displayTimeUnit"] == "ns"


def test_tracks_and_metadata(written, result):
    _, doc = written
    ev = doc["traceEvents"]
    phases = {e["ph"] for e in ev}
    assert {"X", "C", "M"} <= phases
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(procs.values()) == {"kernels", "SMs", "memory"}
    sms_pid = next(p for p, n in procs.items() if n == "SMs")
    threads = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == sms_pid}
    sms = {e.sm for e in result.timeline if isinstance(e, CTAEvent)}
    assert {f"SM {s}" for s in sms} <= {t.split(" slot")[0] for t in threads}
    assert "SM 0" in threads or "SM 0 slot 0" in threads
    launches = [e for e in ev if e["ph"] == "X" and e.get("cat") == "launch"]
    assert [e["name"] for e in launches] == [k.launch for k in result.kernels]
    for e, k in zip(launches, result.kernels):
        assert e["ts"] == pytest.approx(k.start_us, abs=1e-3)


def test_slices_carry_cycles_and_nest_in_their_cta(written, result):
    _, doc = written
    ev = doc["traceEvents"]
    x = [e for e in ev if e["ph"] == "X"]
    assert all("cycles_start" in e["args"] and "cycles_end" in e["args"] for e in x)
    ctas = [e for e in x if "slot" in e["args"]]
    ops = [e for e in x if e.get("cat") in ("tensor", "simt", "wait")]
    assert len(ctas) == sum(1 for e in result.timeline if isinstance(e, CTAEvent))
    assert len(ops) == sum(1 for e in result.timeline if isinstance(e, OpEvent))
    assert {e["cat"] for e in ops} >= {"tensor", "simt"}
    where = {(e["args"]["launch"], e["args"]["cta"]): e for e in ctas}
    clock = result.clock_hz
    for op in ops:
        c = where[(op["args"]["launch"], op["args"]["cta"])]
        assert op["tid"] == c["tid"] and op["pid"] == c["pid"]
        assert c["ts"] <= op["ts"] and op["ts"] + op["dur"] <= c["ts"] + c["dur"] + 1e-9
        assert op["ts"] == pytest.approx(op["args"]["cycles_start"] / clock * 1e6, abs=1e-3)


def test_bandwidth_counters(written, result):
    _, doc = written
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert any("HBM" in n for n in names) and any("L2" in n for n in names)
    hbm = sorted((e for e in counters if "HBM" in e["name"]), key=lambda e: e["ts"])
    assert len(hbm) == timeline.COUNTER_BINS + 1
    width_s = (hbm[-1]["ts"] - hbm[0]["ts"]) * 1e-6 / timeline.COUNTER_BINS
    moved = sum(e["args"]["GB/s"] for e in hbm) * 1e9 * width_s
    logged = sum(e.nbytes for e in result.timeline if isinstance(e, TransferEvent) and e.channel == "hbm")
    assert moved == pytest.approx(logged, rel=1e-3)
    peak = result.hbm_bandwidth_bytes_per_s / 1e9
    assert max(e["args"]["GB/s"] for e in hbm) <= peak * 1.001


def test_bandwidth_bins_conserve_bytes():
    edges, rate = timeline.bandwidth_bins([(0.0, 10.0, 100.0), (5.0, 5.0, 7.0), (2.5, 7.5, 50.0)], 0.0, 10.0, bins=4)
    assert list(edges) == [0.0, 2.5, 5.0, 7.5, 10.0]
    per_bin = rate * 2.5
    assert per_bin.sum() == pytest.approx(157.0)
    assert list(per_bin) == pytest.approx([25.0, 50.0, 50.0 + 7.0, 25.0])     # bins are [a, b)


def test_cap_keeps_first_sms(result):
    p = timeline.parse(result)
    doc = timeline.trace_events(p, result, max_events=40)
    kept = doc["otherData"]["sms_in_trace"]
    assert kept < doc["otherData"]["sms_with_ctas"]
    assert "capped" in doc["otherData"]["note"]
    sms_tids = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X" and "slot" in e.get("args", {})}
    assert max(sms_tids) < kept * p.lanes


def test_svg_and_errors(result, tmp_path):
    paths = timeline.write_timeline(result, tmp_path, fmt="svg")
    assert paths[1].name == "timeline.svg" and "<svg" in paths[1].read_text()[:2000]
    bare = gpusim.simulate("attention_flash", "h100", batch=1, heads=1, seq_len=128, check=False)
    with pytest.raises(ValueError, match="timeline=True"):
        timeline.write_timeline(bare, tmp_path)
