"""File tools: confinement against every kind of path escape, and the tools' own behaviour."""

from __future__ import annotations

import os

import pytest

import clawkit_tools
from clawkit.testing.server import Reply
from clawkit.tools import ToolError
from clawkit_tools import PathRefused, edit_file, glob, list_dir, read_file, resolve, write_file

SECRET = "TOP-SECRET-OUTSIDE-CONTENT"


@pytest.fixture
def layout(tmp_path, workspace, monkeypatch):
    """An outside file, a fake home, and booby-trapped entries inside the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    (workspace / "notes.txt").write_text("inside content\nline two\n")
    os.symlink(outside / "secret.txt", workspace / "link_out.txt")
    os.symlink(outside, workspace / "dir_out")
    os.symlink("/dev/zero", workspace / "zero")
    os.mkfifo(workspace / "pipe")
    return outside


ESCAPES = [
    "../outside/secret.txt",                       # ..
    "sub/../../outside/secret.txt",                # .. through a (missing) subdirectory
    "{outside}/secret.txt",                        # absolute
    "~/secret.txt",                                # home
    "link_out.txt",                                # symlink to a file outside
    "dir_out/secret.txt",                          # symlinked directory
    "%2e%2e/outside/secret.txt",                   # percent-encoded
    "%252e%252e/outside/secret.txt",               # double-encoded
    "\uff0e\uff0e\uff0foutside\uff0fsecret.txt",   # fullwidth ．．／ (NFKC folds to ../)
    "..\\outside\\secret.txt",                     # backslashes
    "\u200b../outside/secret.txt",                 # zero-width space
    "notes\u202etxt.exe",                          # bidi override
    "notes.txt\x00.png",                           # NUL
    "zero",                                        # symlink to a device
    "/dev/zero",                                   # device
    "pipe",                                        # FIFO
    "/proc/self/environ",                          # kernel file system
    "/etc/passwd",                                 # plain absolute path outside
]


def _escape_calls(layout):
    paths = [p.replace("{outside}", str(layout)) for p in ESCAPES]
    calls = [("read_file", {"path": p}) for p in paths]
    calls += [("list_dir", {"path": ".."}), ("list_dir", {"path": "dir_out"}), ("glob", {"pattern": "../*"}),
              ("write_file", {"path": "link_out.txt", "content": "overwritten"}),
              ("write_file", {"path": "../outside/new.txt", "content": "x"}),
              ("edit_file", {"path": "dir_out/secret.txt", "old": "TOP", "new": "NOT"}),
              ("shell_exec", {"command": "cat secret.txt", "cwd": "dir_out"})]
    return calls


@pytest.mark.narrow("the tools plugin's own confinement under an approver that says yes to everything: "
                    "with the policy loaded such an approval is a path grant, so the escape would be approved")
def test_model_driven_escapes_are_all_refused(llm_agent, model_server, layout):
    calls = _escape_calls(layout)
    agent = llm_agent(Reply.tool_calls(calls), "I could not read those.",
                      plugins=(clawkit_tools,), tools=["*"], approver=lambda c, r, ctx: True)
    result = agent.run("read the secrets")
    assert result.reply == "I could not read those."
    results = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert len(results) == len(calls)
    for (name, args), msg in zip(calls, results):
        assert msg["content"].startswith("Error:"), (name, args, msg["content"])
        assert SECRET not in msg["content"]
    assert SECRET not in str(model_server.requests[1].body)
    assert (layout / "secret.txt").read_text() == SECRET
    assert not (layout / "new.txt").exists()
    assert os.path.islink(agent.config.workspace / "link_out.txt")


def test_model_driven_escapes_are_all_refused_with_everything_loaded(llm_agent, model_server, layout):
    """The same escapes with the full install and no approver (a non-interactive run): every one
    is an error, wrapped as data by the shield, and nothing outside the workspace is read or written."""
    calls = _escape_calls(layout)
    agent = llm_agent(Reply.tool_calls(calls), "I could not read those.", tools=["*"])
    assert agent.test_install == "full"
    result = agent.run("read the secrets")
    assert result.reply == "I could not read those."
    results = [m for m in model_server.requests[1].messages if m["role"] == "tool"]
    assert len(results) == len(calls)
    for (name, args), msg in zip(calls, results):
        assert "Error:" in msg["content"], (name, args, msg["content"])
        assert SECRET not in msg["content"]
    assert SECRET not in str(model_server.requests[1].body)
    assert (layout / "secret.txt").read_text() == SECRET
    assert not (layout / "new.txt").exists()
    assert os.path.islink(agent.config.workspace / "link_out.txt")


@pytest.mark.parametrize("raw", ESCAPES)
def test_each_escape_is_refused_with_a_reason(raw, layout, workspace, ctx_for):
    ctx = ctx_for(workspace)
    with pytest.raises(ToolError) as info:
        read_file(ctx, raw.replace("{outside}", str(layout)))
    assert any(w in str(info.value) for w in ("outside the workspace", "refused", "leaves the workspace")), str(info.value)


def test_grants_widen_the_scope_but_never_to_devices(layout, workspace, ctx_for):
    ctx = ctx_for(workspace, granted={"read_file": {"paths": [str(layout), "/dev", "/proc/**"]}})
    assert read_file(ctx, str(layout / "secret.txt")) == SECRET
    assert read_file(ctx, "link_out.txt") == SECRET  # the symlink's target is now inside a granted root
    for raw in ("/dev/zero", "zero", "/proc/self/environ", "pipe"):
        with pytest.raises(PathRefused):
            read_file(ctx, raw)
    with pytest.raises(PathRefused):  # granted to read_file, not to write_file
        write_file(ctx, str(layout / "secret.txt"), "x")
    glob_ctx = ctx_for(workspace, granted={"read_file": {"paths": [str(layout) + "/*.txt"]}})
    assert read_file(glob_ctx, str(layout / "secret.txt")) == SECRET


def test_read_file_offsets_caps_and_binary(workspace, ctx_for):
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(100)))
    (workspace / "bin.dat").write_bytes(b"\x00\x01\x02binary")
    ctx = ctx_for(workspace, max_read_bytes=50)
    assert read_file(ctx_for(workspace), "big.txt", offset=10, limit=2) == "line 10\nline 11\n"
    text = read_file(ctx, "big.txt")
    # head and tail, with a marker naming the omitted bytes and how to read them
    assert text.startswith("line 0\n") and text.endswith("line 99\n") and "bytes omitted: bytes" in text
    assert "offset=" in text
    assert read_file(ctx, "big.txt", offset=90, limit=2) == "line 90\nline 91\n"  # beyond the cap, by lines
    with pytest.raises(ToolError, match="binary"):
        read_file(ctx, "bin.dat")
    with pytest.raises(ToolError, match="does not exist"):
        read_file(ctx, "missing.txt")
    with pytest.raises(ToolError, match="directory"):
        read_file(ctx, ".")


def _read_bytes() -> int:
    """Bytes this thread has read through read() syscalls so far (Linux /proc/thread-self/io: the calling
    thread's own count — the process's also counts whatever another test's leftover thread reads meanwhile)."""
    with open("/proc/thread-self/io") as fh:
        return next(int(ln.split()[1]) for ln in fh if ln.startswith("rchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"), reason="needs Linux /proc/thread-self/io to count bytes read")
def test_big_file_keeps_head_and_tail_reading_only_the_cap(workspace, ctx_for):
    import re

    with (workspace / "app.log").open("w") as fh:
        fh.write("FIRST LINE\n")
        for i in range(200_000):
            fh.write(f"{i:08d} INFO request handled\n")
        fh.write("ERROR: disk full\n")
    size = (workspace / "app.log").stat().st_size
    cap = 256 * 1024
    ctx = ctx_for(workspace, max_read_bytes=cap)
    before = _read_bytes()
    text = read_file(ctx, "app.log")
    read = _read_bytes() - before
    assert size > 5_000_000 and read <= cap + 8192  # the cap from disk (and /proc's own few bytes), not the file
    assert text.startswith("FIRST LINE\n") and text.endswith("ERROR: disk full\n")
    head, marker, tail = re.split(r"\n(\[\.\.\. .*? \.\.\.\])\n", text)
    m = re.match(r"\[\.\.\. (\d+) bytes omitted: bytes (\d+)-(\d+) of (\d+) .*?offset=(\d+), limit=N", marker)
    assert m, marker
    omitted, start, end, total, line = map(int, m.groups())
    assert total == size and end - start == omitted and len(head) + len(tail) + 2 <= cap
    raw = (workspace / "app.log").read_bytes()
    assert raw[:start].decode() == head and raw[end:].decode() == tail  # whole lines either side
    # the offset the marker names reads on exactly where the head stopped
    assert read_file(ctx, "app.log", offset=line, limit=1) == raw[start:].split(b"\n", 1)[0].decode() + "\n"


def test_the_context_budget_lowers_the_read_cap(workspace, ctx_for):
    """A window whose tool-result share is smaller than max_read_bytes: read_file returns what fits
    (2 bytes per budget token), head and tail with its own marker, instead of a result the truncator
    would cut again (losing the file's offsets)."""
    from clawkit.budget import ContextBudget

    (workspace / "app.log").write_text("".join(f"{i:08d} INFO request handled\n" for i in range(20_000)))
    ctx = ctx_for(workspace)
    ctx.budget = ContextBudget(32_000)  # tool_results share 0.3: 9,600 tokens -> 19,200 bytes
    text = read_file(ctx, "app.log")
    assert "bytes omitted" in text and text.endswith("00019999 INFO request handled\n")
    assert 18_000 < len(text.encode()) < 19_200 + 400
    assert len(read_file(ctx_for(workspace), "app.log").encode()) > 250_000  # no budget: max_read_bytes


def test_write_and_edit(workspace, ctx_for):
    ctx = ctx_for(workspace)
    assert write_file(ctx, "a/b/c.txt", "one two two") .startswith("created a/b/c.txt")
    assert write_file(ctx, "a/b/c.txt", "one two two").startswith("overwrote")
    with pytest.raises(ToolError, match="occurs 2 times"):
        edit_file(ctx, "a/b/c.txt", "two", "three")
    with pytest.raises(ToolError, match="not found"):
        edit_file(ctx, "a/b/c.txt", "four", "five")
    edit_file(ctx, "a/b/c.txt", "one", "ONE")
    edit_file(ctx, "a/b/c.txt", "two", "2", replace_all=True)
    assert (workspace / "a/b/c.txt").read_text() == "ONE 2 2"
    assert not [p for p in (workspace / "a/b").iterdir() if p.name.endswith(".tmp")]
    with pytest.raises(ToolError, match="limit"):
        write_file(ctx_for(workspace, max_write_bytes=3), "x.txt", "toolong")


def test_list_dir_and_glob_stay_inside(layout, workspace, ctx_for):
    ctx = ctx_for(workspace)
    (workspace / "src").mkdir()
    (workspace / "src" / "m.py").write_text("x")
    listing = list_dir(ctx, ".")
    assert "src/" in listing and "notes.txt" in listing and "link_out.txt -> " in listing
    found = glob(ctx, "**/*")
    assert "src/m.py" in found and "notes.txt" in found
    assert "secret" not in found  # the symlinked directory's contents are outside: not listed
    for bad in ("../*", "/etc/*", "~/*"):
        with pytest.raises(PathRefused):
            glob(ctx, bad)


def test_resolve_keeps_inside_paths(workspace, ctx_for):
    ctx = ctx_for(workspace)
    assert resolve("x/../y.txt", ctx, "read_file") == workspace.resolve() / "y.txt"
    assert resolve(str(workspace / "z.txt"), ctx, "read_file") == workspace.resolve() / "z.txt"
