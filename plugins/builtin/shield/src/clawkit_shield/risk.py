"""Layer 2: a risk score for one call from access level, data sensitivity and session trust.

``score = 1 - (1 - access) * (1 - sensitivity) * (1 - distrust)`` — a noisy-OR, so
each factor alone can raise the score but none can lower another. With the
default weights: a safe read scores 0.05 (allow), a guarded write 0.25 (allow), an
unsafe shell command 0.5 (log), reading ``.env`` 0.52 (log), ``cat ~/.ssh/id_rsa``
through the shell 0.75 (approval), and a shell command in a tainted session 0.7
(approval).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .capabilities import Resources

try:
    import re2
except ImportError:  # pragma: no cover
    re2 = None

DEFAULT_SENSITIVE_PATHS = [
    "**/.env", "**/.env.*", "**/*.env", "**/.ssh/**", "**/id_rsa*", "**/id_dsa*", "**/id_ecdsa*", "**/id_ed25519*",
    "**/*.pem", "**/*.key", "**/*.p12", "**/*.pfx", "**/*.keystore", "**/*.jks", "**/*.kdbx", "**/.aws/**",
    "**/.azure/**", "**/.config/gcloud/**", "**/.kube/config", "**/.docker/config.json", "**/.netrc", "**/.pgpass",
    "**/.git-credentials", "**/.npmrc", "**/.pypirc", "**/.gnupg/**", "**/credentials", "**/credentials.*",
    "**/secrets", "**/secrets.*", "**/*secret*.json", "**/*secret*.y*ml", "**/.bash_history", "**/.zsh_history",
    "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d/**", "/proc/*/environ", "/proc/self/**",
]

# sensitive things named inside a shell command or URL rather than as a path argument
_SENSITIVE_MENTION = (
    r"(?:^|[\s'\"=/:])(?:\.env\b|\.ssh/|id_rsa|id_ed25519|id_ecdsa|\.aws/|\.netrc|\.git-credentials|\.pgpass"
    r"|/etc/shadow|/etc/sudoers|\.kube/config|\.gnupg|/proc/self/environ|\.pem\b)"
    r"|(?:^|[;&|]\s*)(?:printenv|env|set)\s*(?:$|[;&|>])"
)

# credentials by their shape; values only ever reported by kind
_SECRET_SHAPES = (
    r"sk-(?:ant-|proj-)?[a-z0-9_-]{20,}|akia[0-9a-z]{16}|asia[0-9a-z]{16}|gh[pousr]_[a-z0-9]{30,}|github_pat_[a-z0-9_]{30,}"
    r"|xox[abprs]-[a-z0-9-]{10,}|aiza[0-9a-z_-]{35}|glpat-[a-z0-9_-]{20}|sk_live_[0-9a-z]{20,}|rk_live_[0-9a-z]{20,}"
    r"|-----begin (?:rsa |ec |dsa |openssh |encrypted |pgp )?private key|eyj[a-z0-9_-]{10,}\.eyj[a-z0-9_-]{10,}\."
    r"|(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)[\"']?\s*[=:]\s*[\"']?[^\s\"',;]{8,}"
)


class _Pattern:
    """Python ``re`` for short text (no call overhead), RE2 for long text (linear time)."""

    LONG = 4096

    def __init__(self, pattern: str):
        self.short = re.compile(pattern, re.IGNORECASE)
        if re2 is not None:
            options = re2.Options()
            options.case_sensitive = False
            self.long = re2.compile(pattern, options)
        else:  # pragma: no cover
            self.long = self.short

    def search(self, text: str) -> bool:
        return bool((self.short if len(text) < self.LONG else self.long).search(text))


SENSITIVE_MENTION = _Pattern(_SENSITIVE_MENTION)
SECRET_SHAPES = _Pattern(_SECRET_SHAPES)


@dataclass
class Assessment:
    """A call's score and the factors behind it (reasons never contain secret values)."""

    score: float
    access: float
    sensitivity: float
    distrust: float
    reasons: list[str] = field(default_factory=list)


def glob_to_regex(pattern: str) -> str:
    """A path glob as a regex: ``**`` any depth, ``*``/``?`` within one name, ``[...]`` a class.

    Relative patterns match at any depth (``.env`` and ``**/.env`` are the same);
    ``dir/**`` also matches ``dir`` itself. The result is RE2- and ``re``-compatible.
    """
    pat = os.path.expanduser(pattern)
    anchored = pat.startswith("/")
    if pat.endswith("/**"):
        pat = pat[:-3] + "{/**,}"
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in pat[i + 2 :]:
            j = pat.index("]", i + 2)
            body = pat[i + 1 : j].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = j + 1
        elif pat.startswith("{/**,}", i):
            out.append("(?:/.*)?")
            i += 6
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    if anchored or body.startswith("(?:.*/)?"):
        return body
    return "(?:.*/)?" + body


class SensitivePaths:
    """Matches resolved paths against the configured sensitive globs: one compiled expression."""

    def __init__(self, patterns: list[str]):
        self.patterns = list(patterns)
        regexes = [glob_to_regex(p) for p in self.patterns]
        # one automaton: alternation of 40 globs costs ~30 us per path with backtracking ``re``, ~1 us in RE2
        relative = [r[len("(?:.*/)?"):] for r in regexes if r.startswith("(?:.*/)?")]
        absolute = [r for r in regexes if not r.startswith("(?:.*/)?")]
        parts = ([f"(?:.*/)?(?:{'|'.join(relative)})"] if relative else []) + absolute
        source = "(?:" + "|".join(parts) + ")"
        self.regex = (re2.compile(source) if re2 is not None else re.compile(source + r"\Z")) if parts else None

    def match(self, path: str) -> bool:
        return bool(self.regex and self.regex.fullmatch(path))


def assess(
    *,
    risk: str,
    capability: str | None,
    arguments: dict[str, Any],
    resources: Resources,
    trust: float,
    weights: Any,
    sensitive: SensitivePaths,
) -> Assessment:
    """Score one call. ``weights`` is the shield config's ``weights`` section."""
    access = float(getattr(weights, risk, 0.5))
    reasons: list[str] = [f"{risk} tool"]
    sensitivity = 0.0
    if arguments or resources.paths or resources.hosts or resources.command_text:  # (else nothing to look at)
        sensitivity = _sensitivity(capability, arguments, resources, weights, sensitive, reasons)
    distrust = max(0.0, min(1.0, 1.0 - trust))
    if distrust > 0:
        reasons.append(f"session trust {trust:.2f}")
    score = 1.0 - (1.0 - access) * (1.0 - sensitivity) * (1.0 - distrust)
    return Assessment(round(score, 4), access, sensitivity, distrust, reasons)


def _sensitivity(capability: str | None, arguments: dict[str, Any], resources: Resources, weights: Any,
                 sensitive: SensitivePaths, reasons: list[str]) -> float:
    """The data-sensitivity factor of a call that names something (its reasons appended to ``reasons``)."""
    sensitivity = 0.0
    touched = [p for p in resources.paths if sensitive.match(p)]
    if touched:
        sensitivity = max(sensitivity, weights.sensitive_path)
        reasons.append(f"sensitive path ({_short(touched[0])})")
    text = resources.command_text + " ".join(u for _, u in resources.hosts)
    if text and SENSITIVE_MENTION.search(text):
        sensitivity = max(sensitivity, weights.sensitive_path)
        reasons.append("command or URL names sensitive data")
    blob = _flatten(arguments)
    if blob and SECRET_SHAPES.search(blob):
        egress = capability in ("net.http", "shell.exec")
        sensitivity = max(sensitivity, weights.secret_egress if egress else weights.secret)
        reasons.append("a credential in the arguments" + (" of a call that can send it out" if egress else ""))
    return sensitivity


def _flatten(arguments: dict[str, Any]) -> str:
    parts = []
    for v in arguments.values():
        if isinstance(v, str):
            parts.append(v)
        elif v is not None and not isinstance(v, (int, float, bool)):
            parts.append(json.dumps(v, default=str))
    return "\n".join(parts)


def _short(path: str) -> str:
    return path if len(path) <= 60 else "…" + path[-59:]
