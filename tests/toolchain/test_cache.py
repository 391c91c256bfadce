"""The Triton backend's disk cache is safe on a shared host (SECURITY.md): it lives in a directory of
the user's own, refuses directories others own or can write, and never imports a cached source
whose content is not the one asked for. No triton needed."""
import os
import stat

import pytest

from gpusim.toolchain import cache


@pytest.fixture
def root(tmp_path, monkeypatch):
    d = tmp_path / "gpusim-cache"
    monkeypatch.setenv("GPUSIM_CACHE_DIR", str(d))
    return d


def test_location_defaults_to_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUSIM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == str(tmp_path / "xdg" / "gpusim")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_root() == str(tmp_path / "home" / ".cache" / "gpusim")


def test_created_private(root):
    path = cache.cache_dir("triton")
    for d in (root, root / "triton"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert path == str(root / "triton")


def test_planted_file_with_matching_name_is_not_executed(root, tmp_path):
    marker = tmp_path / "pwned"
    source = "VALUE = 42\n"
    planted = f"open({str(marker)!r}, 'w').write('x')\nVALUE = 666\n"
    path = root / "triton" / f"gpusim_{cache.digest(source)}.py"
    cache.cache_dir("triton")
    path.write_text(planted)
    mod = cache.import_source(source, "test-planted")
    assert mod.VALUE == 42
    assert not marker.exists()
    assert path.read_text() == source        # rewritten with the verified content


def test_source_seen_by_inspect_is_the_verified_one(root):
    import inspect

    source = "def f():\n    return 1\n"
    mod = cache.import_source(source, "test-inspect")
    (root / "triton" / f"gpusim_{cache.digest(source)}.py").write_text("def f():\n    return 2\n")
    assert inspect.getsource(mod.f) == source


def test_foreign_owned_dir_is_refused(root, monkeypatch):
    cache.cache_dir()
    monkeypatch.setattr(cache, "_uid", lambda: os.getuid() + 1)
    with pytest.raises(cache.CacheDirError, match="owned by uid") as e:
        cache.cache_dir("triton")
    assert "\n" not in str(e.value)
    with pytest.raises(cache.CacheDirError):
        cache.import_source("VALUE = 1\n", "test-foreign")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_group_or_world_writable_dir_is_refused(root, mode):
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(cache.CacheDirError, match="writable by group or others"):
        cache.cache_dir()


def test_writable_subdirectory_is_refused(root):
    (root / "triton").mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    os.chmod(root / "triton", 0o777)
    with pytest.raises(cache.CacheDirError, match="triton"):
        cache.cache_dir("triton")


def test_symlinked_dir_is_refused(root, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    root.symlink_to(target)
    with pytest.raises(cache.CacheDirError, match="not a plain directory"):
        cache.cache_dir()
