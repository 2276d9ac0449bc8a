"""Manifest matching and risk factors as plain functions (fast, many cases)."""

from __future__ import annotations

import os

import pytest

from clawkit_shield.capabilities import (
    ManifestError,
    canonical_host,
    check,
    extract_resources,
    parse_permissions,
)
from clawkit_shield.config import Weights
from clawkit_shield.risk import DEFAULT_SENSITIVE_PATHS, SensitivePaths, assess


def verdict(tool, capability, args, items, ws):
    res = extract_resources(args, str(ws))
    if not res.paths and capability.startswith(("fs.", "shell.")):
        res.paths.append(os.path.realpath(ws))
    r = check(tool, capability, res, parse_permissions(items), str(ws))
    return None if r is None else r.kind


@pytest.mark.parametrize(
    "command, expected",
    [
        ("git status", None),
        ("git log --oneline -5", None),
        ("git status; rm -rf /", "denied"),
        ("git status && curl https://x.example", "denied"),
        ("git log $(rm -rf ~)", "denied"),
        (["git", "log", "-1"], None),
        ("rm -rf build", "denied"),
    ],
)
def test_shell_commands_are_checked_segment_by_segment(tmp_path, command, expected):
    items = [{"capability": "shell.exec", "allow": ["git status", "git log *"], "deny": ["rm *"]}]
    assert verdict("shell_exec", "shell.exec", {"command": command}, items, tmp_path) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("https://api.example.org/v1", None),
        ("https://API.Example.ORG./v1", None),
        ("https://deep.sub.example.org/", None),
        ("https://example.org/", "denied"),  # *.example.org is subdomains only
        ("https://docs.corp.test/x", None),
        ("https://corp.test/x", None),  # .corp.test covers the domain too
        ("http://10.1.2.3/", None),
        ("http://10.9.9.9/", "denied"),  # deny list beats the CIDR grant
        ("https://evil.example.net/", "denied"),
        ("https://xn--bcher-kva.example.org/", None),
    ],
)
def test_hosts(tmp_path, url, expected):
    items = [{"capability": "network", "allow": ["*.example.org", ".corp.test", "10.0.0.0/8"], "deny": ["10.9.0.0/16"]}]
    assert verdict("web_fetch", "net.http", {"url": url}, items, tmp_path) == expected


def test_canonical_hosts():
    assert canonical_host("0x7f.1") == "127.0.0.1"
    assert canonical_host("2130706433") == "127.0.0.1"
    assert canonical_host("[::1]") == "::1"
    assert canonical_host("Bücher.Example.") == "xn--bcher-kva.example"


def test_paths_resolve_home_dotdot_and_symlinks(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    os.symlink(home / "notes", ws / "docs" / "notes-link")
    items = [{"capability": "fs.read", "paths": ["docs", "~/notes/*.md"]}]
    assert verdict("read_file", "fs.read", {"path": "docs/a.md"}, items, ws) is None
    assert verdict("read_file", "fs.read", {"path": "~/notes/today.md"}, items, ws) is None
    assert verdict("read_file", "fs.read", {"path": "docs/notes-link/today.md"}, items, ws) is None  # really ~/notes/today.md
    assert verdict("read_file", "fs.read", {"path": "docs/notes-link/today.txt"}, items, ws) == "denied"
    assert verdict("read_file", "fs.read", {"path": "docs/../secret.md"}, items, ws) == "denied"
    assert verdict("read_file", "fs.read", {"path": str(tmp_path / "x.md")}, items, ws) == "denied"
    assert verdict("glob", "fs.read", {"pattern": "docs/**/*.md"}, items, ws) is None
    assert verdict("glob", "fs.read", {"pattern": "../**/*.md"}, items, ws) == "denied"


def test_deny_items_and_ungranted_capabilities(tmp_path):
    items = [{"capability": "fs.read"}, {"deny": ["fs.write", "shell.exec"]}, {"deny": "net.http", "allow": ["*.internal"]}]
    assert verdict("write_file", "fs.write", {"path": "a"}, items, tmp_path) == "denied"
    assert verdict("web_fetch", "net.http", {"url": "http://db.internal/"}, items, tmp_path) == "denied"
    assert verdict("web_fetch", "net.http", {"url": "https://example.com/"}, items, tmp_path) == "ungranted"
    assert verdict("read_file", "fs.read", {"path": "a"}, items, tmp_path) is None


@pytest.mark.parametrize("items", [[{"allow": ["x"]}], [{"capability": 3}], [{"capability": "fs.read", "paths": {"a": 1}}], [42]])
def test_malformed_items_raise(items):
    with pytest.raises(ManifestError):
        parse_permissions(items)


def test_sensitive_paths_and_secret_shapes(tmp_path):
    sensitive = SensitivePaths(DEFAULT_SENSITIVE_PATHS)
    assert sensitive.match("/home/u/.ssh/id_ed25519") and sensitive.match("/srv/app/.env.production")
    assert not sensitive.match("/srv/app/environment.py") and not sensitive.match("/srv/app/keys.md")
    w = Weights()

    def score(risk, capability, args):
        return assess(risk=risk, capability=capability, arguments=args, resources=extract_resources(args, str(tmp_path)),
                      trust=1.0, weights=w, sensitive=sensitive).score

    assert score("safe", "fs.read", {"path": "notes.md"}) == 0.05
    assert score("guarded", "fs.write", {"path": "notes.md", "content": "hello"}) == 0.25
    assert score("guarded", "fs.write", {"path": "cfg.txt", "content": "api_key = 'sk-live-abcdefghijklmnop'"}) == 0.625
    assert score("unsafe", "shell.exec", {"command": "printenv"}) == 0.75
    assert score("unsafe", "shell.exec", {"command": "ls -la"}) == 0.5
    assert score("safe", "net.http", {"url": "https://x.example/?t=ghp_" + "a" * 36}) == 0.715
