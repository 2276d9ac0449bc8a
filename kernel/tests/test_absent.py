"""clawkit.absent: missing files are noticed when they appear, with one stat per parent folder."""

import os
import time

from clawkit import absent as absent_mod
from clawkit.absent import AbsentPaths


def _age(*paths, seconds=60):
    t = time.time_ns() - int(seconds * 1e9)
    for p in paths:
        os.utime(p, ns=(t, t))


def test_settled_parents_answer_without_looking_at_the_paths(tmp_path, monkeypatch):
    (tmp_path / "here.md").write_text("x")
    _age(tmp_path)
    watch = AbsentPaths([str(tmp_path / "README.md"), str(tmp_path / "deep" / "er" / "x.md"), str(tmp_path / "here.md")])
    assert watch.absent() == (str(tmp_path / "README.md"), str(tmp_path / "deep" / "er" / "x.md"))
    stats = []
    real = os.stat
    monkeypatch.setattr(absent_mod.os, "stat", lambda p, *a, **k: stats.append(str(p)) or real(p, *a, **k))
    assert len(watch.absent()) == 2
    assert stats == [str(tmp_path)]  # both missing paths hang off one existing folder
    monkeypatch.setattr(absent_mod.os, "stat", real)
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "x.md").write_text("y")
    assert watch.absent() == (str(tmp_path / "README.md"),)


def test_a_recently_changed_parent_is_not_trusted(tmp_path, monkeypatch):
    watch = AbsentPaths([str(tmp_path / "MEMORY.md")])
    assert watch.absent() == (str(tmp_path / "MEMORY.md"),)
    # the folder changed within the racy window: the path itself is looked at every time
    exists = []
    real = os.path.exists
    monkeypatch.setattr(absent_mod.os.path, "exists", lambda p: exists.append(p) or real(p))
    watch.absent()
    assert exists == [str(tmp_path / "MEMORY.md")]


def test_a_replaced_parent_folder_is_noticed(tmp_path):
    parent = tmp_path / "ws"
    parent.mkdir()
    _age(parent)
    watch = AbsentPaths([str(parent / "AGENTS.md")])
    assert watch.absent()
    os.rename(parent, tmp_path / "old")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "AGENTS.md").write_text("z")
    os.rename(tmp_path / "new", parent)
    _age(parent)  # even with the old mtime, the inode differs
    assert watch.absent() == ()


def test_a_dangling_symlink_is_never_trusted(tmp_path):
    (tmp_path / "MEMORY.md").symlink_to(tmp_path / "elsewhere.md")
    _age(tmp_path)
    watch = AbsentPaths([str(tmp_path / "MEMORY.md")])
    assert watch.absent()
    (tmp_path / "elsewhere.md").write_text("now it resolves")  # the link's own folder is untouched
    _age(tmp_path)
    assert watch.absent() == ()


def test_a_path_that_vanishes_is_noticed(tmp_path):
    (tmp_path / "README.md").write_text("x")
    _age(tmp_path)
    watch = AbsentPaths([str(tmp_path / "README.md")])
    assert watch.absent() == ()
    assert watch.absent() == ()
    (tmp_path / "README.md").unlink()
    assert watch.absent() == (str(tmp_path / "README.md"),)
