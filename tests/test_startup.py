"""What keeps the everyday commands quick, and that it changes no output: the toolchain versions kept in the
cache folder, jinja2's template bytecode there, and the command line building only the subcommand it runs.
(No test here times anything: docs/performance.md gives the measured numbers and the command that measured them.)"""

import json

import pytest

from ptxgen.derive.tile.layout import derive
from ptxgen.derive.tile.spec import make_spec
from ptxgen.emit import env
from ptxgen.emit.render import render_kernel
from ptxgen.runtime.compile import cache

SEED = dict(bm=128, bn=128, bk=32, a="kmajor-sw64")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("PTXGEN_NO_CACHE", raising=False)
    return tmp_path / "c"


def test_toolchain_versions_are_asked_once_then_read_from_the_cache_folder(folder, monkeypatch):
    asked = []
    monkeypatch.setattr(cache, "_ask_toolchain", lambda: asked.append(1) or {"nvrtc": "13.5", "cuda-bindings": "x"})
    first = cache.toolchain_id.__wrapped__()
    assert asked == [1] and json.loads((folder / cache.TOOLCHAIN_MEMO).read_text())["ids"] == first
    assert cache.toolchain_id.__wrapped__() == first and asked == [1]  # the memo answered


def test_a_changedtoolchain_fingerprint_asks_again(folder, monkeypatch):
    """Control: a memo written under another fingerprint (another interpreter, a package installed) is not used."""
    answers = iter([{"nvrtc": "13.5"}, {"nvrtc": "13.6"}])
    monkeypatch.setattr(cache, "_ask_toolchain", lambda: next(answers))
    assert cache.toolchain_id.__wrapped__() == {"nvrtc": "13.5"}
    real = cache.toolchain_fingerprint()
    monkeypatch.setattr(cache, "toolchain_fingerprint", lambda: real + ["another site-packages"])
    assert cache.toolchain_id.__wrapped__() == {"nvrtc": "13.6"}


def test_no_cache_keeps_no_toolchain_memo(folder, monkeypatch):
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    monkeypatch.setattr(cache, "_ask_toolchain", lambda: {"nvrtc": "13.5"})
    cache.toolchain_id.__wrapped__()
    assert not folder.exists()


def test_template_bytecode_is_kept_and_renders_the_same_kernel(folder):
    t = derive(make_spec(**SEED))
    want = render_kernel(t)
    env.environment.cache_clear()
    try:
        first = render_kernel(t)  # compiles the templates, writes their bytecode
        kept = sorted(p.name for p in (folder / "jinja2").iterdir())
        assert kept and all(n.endswith(".cache") for n in kept)
        env.environment.cache_clear()
        assert render_kernel(t) == first == want  # from the bytecode
    finally:
        env.environment.cache_clear()


def test_template_bytecode_follows_the_template_source(folder, tmp_path, monkeypatch):
    """Control: jinja2 checks each template's source checksum, so an edited template is compiled again."""
    import jinja2

    (tmp_path / "t.j2").write_text("one {{ x }}")
    options = dict(env.OPTIONS, loader=jinja2.FileSystemLoader(str(tmp_path)))
    assert jinja2.Environment(bytecode_cache=env._bytecode_cache(), **options).get_template("t.j2").render(x=1) == "one 1"
    (tmp_path / "t.j2").write_text("two {{ x }}")
    assert jinja2.Environment(bytecode_cache=env._bytecode_cache(), **options).get_template("t.j2").render(x=1) == "two 1"


def test_no_cache_keeps_no_template_bytecode(folder, monkeypatch):
    monkeypatch.setenv("PTXGEN_NO_CACHE", "1")
    assert env._bytecode_cache() is None
