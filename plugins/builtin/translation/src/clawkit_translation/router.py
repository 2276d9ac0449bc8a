"""encode_inbound: a pure-code intent classifier (no model call, well under 1 ms).

One pass of a precompiled keyword/phrase regex scores every intent; each intent
belongs to a profile (research, system, coder, memory, browser, automation,
conversation). Confidence is the winner's share of the evidence, so one weak
hint gives a low confidence and several agreeing hints a high one. Skills are
matched by their name, configured keywords, their Vibe ``Trigger`` (the words of its
positive clauses, stemmed) and description, with a bonus when the skill serves the
message's profile; several matching skills of one profile: the workspace's beats the
user's beats a bundled one (the lower one is shadowed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

MAX_CHARS = 1500  # characters of a message the classifier reads
PROFILES = ("research", "system", "coder", "memory", "browser", "automation", "conversation")

# intent: (profile, {weight: "keyword | phrase | ..."}) — plurals (s/es) match automatically
INTENTS: dict[str, tuple[str, dict[float, str]]] = {
    "weather": ("research", {3: "weather|forecast|temperature|rain|raining|snow|snowing|sunny|humidity|umbrella|celsius|fahrenheit|storm|windy"}),
    "web_search": ("research", {
        3: "search the web|web search|google|look up|find out|research|latest news|news",
        2: "search|sources|article|paper|compare|population|stock price|who is|who was|when did|how many|wikipedia"
           "|vulnerability|vulnerabilities|cve|security advisory|advisories",
        0.5: "what is|what are|why|latest|current",
    }),
    "summarize": ("research", {3: "summarize|summarise|summary|tl;dr|tldr", 1: "explain|overview"}),
    "shell": ("system", {
        3: "shell|terminal|bash|zsh|sudo|apt|apt-get|brew|systemctl|docker|container|daemon|uptime|cpu usage|disk space|disk usage|kill the process",
        2: "command|install|uninstall|process|service|restart|ram|memory usage|port|environment variable|cron job|kernel|os|reboot",
        1: "run|execute|server|logs",
    }),
    "files": ("system", {
        3: "folder|directory|mkdir|chmod|permissions",
        2: "file|delete|rename|move|copy|disk",
        1: "list|ls",
    }),
    "code": ("coder", {
        3: "code|function|bug|debug|refactor|implement|compile|traceback|stack trace|exception|unit test|pull request|syntax error|typescript|javascript|python|rust|golang|java|sql|regex|lint|linter|type hint|codebase|repository|repo|script",
        2: "class|method|test|tests|fix|build|api|endpoint|variable|error|commit|merge|diff|branch|git|review",
    }),
    "remember": ("memory", {3: "remember|memorize|memorise|note that|don't forget|do not forget|keep in mind|save this", 2: "from now on"}),
    "recall": ("memory", {
        3: "recall|what did i|did i tell you|did i say|last time|you told me|previously|my preference|my favorite|my favourite|forget",
        2: "do you know my|what's my|what is my",
    }),
    "browse": ("browser", {
        3: "website|webpage|web page|browser|click|navigate|go to|open the page|screenshot|log in to|login to|sign in to|fill in the form|fill out the form|tab",
        2: "page|site|url|link|scroll|form|open",
    }),
    "schedule": ("automation", {
        3: "schedule|every day|every morning|every evening|every week|every hour|every monday|daily|weekly|hourly|cron|remind me|reminder|automate|automation|workflow|recurring|whenever|each time",
        2: "trigger|pipeline|every|at noon|tomorrow at",
    }),
    "greeting": ("conversation", {3: "hi|hello|hey|thanks|thank you|good morning|good evening|how are you|bye|goodbye|cheers"}),
    "chitchat": ("conversation", {2: "joke|story|poem|opinion|chat|fun fact", 1: "you|feel|think"}),
}

# (intent, weight, pattern, two literals one of which every match holds — None: no such pair)
_SPECIAL: list[tuple[str, float, re.Pattern[str], tuple[str, str] | None]] = [
    ("browse", 3.0, re.compile(r"https?://|www\.[a-z0-9-]+\."), ("://", "www.")),
    ("code", 3.0, re.compile(r"```|\b(?:def|class|import|return|const|let|fn)\s+\w|=>|\w\(\)|\.(?:py|js|ts|tsx|rs|go|java|rb|cpp|c|h|cs|php|sql)\b"), None),
    ("shell", 3.0, re.compile(r"(?m)^\s*\$ \S|\b(?:ls|cd|grep|cat|chmod|curl|pip|npm) -"), ("$ ", " -")),
    ("schedule", 2.0, re.compile(r"\b(?:at|every)\s+\d{1,2}(?::\d\d)?\s*(?:am|pm)\b"), ("am", "pm")),
]
_SPACES = re.compile(r"\s+")

_STOP = set("the a an and or of to in on for with about from into by at is are was were be this that these those it its my your our me you i we "
            "please can could would should will do does did what whats what's how when where which who whom why get give tell show use using "
            "some any all more most other than then also just like make".split())


def _build() -> tuple[re.Pattern[str], dict[str, list[tuple[str, float]]]]:
    table: dict[str, list[tuple[str, float]]] = {}
    for intent, (_profile, groups) in INTENTS.items():
        for weight, words in groups.items():
            for w in words.split("|"):
                table.setdefault(w.strip(), []).append((intent, float(weight)))
    return _keyword_pattern(table), table


def _keyword_pattern(keywords: Iterable[str]) -> re.Pattern[str]:
    """One regex finding any of ``keywords`` (a space in one matches any run of whitespace) as
    whole words, with an optional plural ``s``/``es``.

    The alternation is written as a trie (``kill(?:\\s+the\\s+process)?``…), not as a list of
    several hundred phrases: ``re`` tries a list one phrase at a time at every position of the
    text (~8 us for a short message), a trie one character. Where one phrase extends another the
    longer is tried first, as a list sorted longest first would."""
    end = ""
    trie: dict[str, Any] = {}
    for kw in keywords:
        node = trie
        for token in re.findall(r" +|[^ ]", kw):
            node = node.setdefault(r"\s+" if token[0] == " " else re.escape(token), {})
        node[end] = {}

    def render(node: dict[str, Any]) -> str:
        branches = [tok + render(child) for tok, child in node.items() if tok != end]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return "(?:" + body + ")?" if end in node else body

    return re.compile(r"(?<![\w'])(" + render(trie) + r")(?:e?s)?(?![\w'])")


_PATTERN, _TABLE = _build()
_WORD = re.compile(r"[a-z0-9][a-z0-9_+#.-]*[a-z0-9+#]|[a-z0-9]")


@dataclass
class Route:
    """The routing decision for one message (turn state ``route``; never in a prompt)."""

    intent: str
    profile: str
    confidence: float
    skills: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    model: str | None = None  # the model this turn uses (None: the agent's)
    fallback_models: list[str] = field(default_factory=list)
    model_reason: str | None = None  # skill:<name> | profile:<name> | escalation:…

    def as_dict(self) -> dict[str, Any]:
        out = {"intent": self.intent, "profile": self.profile, "confidence": self.confidence,
               "skills": list(self.skills), "tools": list(self.tools)}
        if self.model:
            out.update(model=self.model, fallback_models=list(self.fallback_models), model_reason=self.model_reason)
        return out


@dataclass(frozen=True)
class SkillInfo:
    """What the router knows of a skill: a name, one line, optional keywords and weight, its
    Vibe ``trigger`` and where it was found (``source``: workspace, path, user, plugin:…)."""

    name: str
    description: str = ""
    keywords: tuple[str, ...] = ()
    weight: float = 1.0
    trigger: str = ""
    source: str = ""
    model: str = ""
    fallback_models: tuple[str, ...] = ()


def source_rank(source: str) -> int:
    """Precedence of a skill's source when several match: workspace 0, extra path 1, user 2,
    bundled (``plugin:…``, unknown) 3."""
    return {"workspace": 0, "path": 1, "user": 2}.get(source, 3)


_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ies", "ied", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    """A crude stem, applied alike to a trigger's words and a message's: ``reminder`` and
    ``remind``, ``scheduling`` and ``schedule``, ``screenshots`` and ``screenshot`` meet."""
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 4:
            word = word[: -len(suf)]
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


# words every trigger sentence has ("User asks to …") and a clause that negates the rest
_TRIGGER_STOP = set("user users ask asks asked want wants wanted request requests requested need needs something "
                    "anything someone when whenever perform performs".split())
_NEGATION = re.compile(r"\b(?:doesn't|does not|don't|do not|isn't|is not|not|never|unless|except|other than|rather than)\b"
                       r"[^.;]*", re.I)


def trigger_terms(text: str) -> set[str]:
    """The stems of a trigger's positive clauses: the words after a negation ("…or the intent
    doesn't clearly match web search, code…") describe what the skill is *not* for."""
    positive = _NEGATION.sub(" ", text)
    return {stem(w) for w in _WORD.findall(positive.lower()) if len(w) >= 3 and w not in _STOP and w not in _TRIGGER_STOP}


def words(text: str) -> set[str]:
    """Lower-cased words with naive folding of plurals and verb endings.

    ``issues`` → ``issue``, ``raining`` → ``rain``, ``rained`` → ``rain``, ``running`` →
    ``run``: the folded forms are added next to the word itself, so a keyword matches
    its inflections without losing exact matches.
    """
    out = set()
    for w in _WORD.findall(text.lower()):
        out.add(w)
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            out.add(w[:-1])
        for suffix in ("ing", "ed"):
            if len(w) > len(suffix) + 3 and w.endswith(suffix):
                stem = w[: -len(suffix)]
                out.add(stem)
                if len(stem) > 3 and stem[-1] == stem[-2]:  # running → runn → run
                    out.add(stem[:-1])
    return out


class IntentRouter:
    """Classifies messages into intents and profiles and matches skills.

    ``keywords`` adds ``{profile: [keyword, ...]}`` hints (intent ``<profile>.custom``).
    """

    def __init__(self, keywords: Mapping[str, Iterable[str]] | None = None):
        self.pattern, self.table = _PATTERN, _TABLE
        self.profile_of = {i: p for i, (p, _) in INTENTS.items()}
        if keywords:
            table = {k: list(v) for k, v in _TABLE.items()}
            for profile, kws in keywords.items():
                intent = f"{profile}.custom"
                self.profile_of[intent] = profile
                for kw in kws:
                    table.setdefault(kw.lower().strip(), []).append((intent, 3.0))
            self.pattern = _keyword_pattern(table)
            self.table = table
        self._skill_cache: dict[SkillInfo, tuple[set[str], list[set[str]], set[str], set[str], str | None]] = {}

    def scores(self, text: str) -> dict[str, float]:
        # a long paste is routed by its head: keeps the worst case well under 1 ms
        low = text[:MAX_CHARS].lower()
        scores: dict[str, float] = {}
        table = self.table
        for m in self.pattern.finditer(low):
            key = m.group(1)
            if not key.isalnum():  # a phrase: any run of whitespace matched, the table has one space
                key = _SPACES.sub(" ", key)
            for intent, weight in table.get(key, ()):
                scores[intent] = scores.get(intent, 0.0) + weight
        for intent, weight, rx, needs in _SPECIAL:
            if (needs is None or needs[0] in low or needs[1] in low) and rx.search(low):
                scores[intent] = scores.get(intent, 0.0) + weight
        return scores

    def classify(self, text: str) -> tuple[str, str, float]:
        """``(intent, profile, confidence)`` for ``text``."""
        scores = self.scores(text)
        if not scores or max(scores.values()) < 1.0:
            return "chat", "conversation", 0.5
        by_profile: dict[str, float] = {}
        for intent, s in scores.items():
            p = self.profile_of[intent]
            by_profile[p] = by_profile.get(p, 0.0) + s
        intent = max(scores, key=lambda i: (by_profile[self.profile_of[i]], scores[i]))
        profile = self.profile_of[intent]
        best = by_profile[profile]
        rest = sum(v for p, v in by_profile.items() if p != profile)
        confidence = best / (best + rest + 1.5)  # +1.5: a single weak hint is not certainty
        return intent, profile, round(min(confidence, 0.99), 3)

    # skills ------------------------------------------------------------------------------

    def match_skills(self, text: str, skills: Iterable[SkillInfo], limit: int = 2, profile: str | None = None) -> list[str]:
        """Names of the skills ``text`` is about, best first (at most ``limit``).

        Evidence: every name part (3), a keyword phrase (3 each), trigger words (1.5 each, at
        most 3), description words (1 each, at most 3); when there is name, keyword or trigger
        evidence and the skill serves the message's ``profile`` (its own text routes there), 1.5
        more. 2 is enough. Matches are ordered by source (workspace, path, user, bundled), then
        score; a match from a lower source serving the same profile as a kept one is shadowed."""
        raw = text[:MAX_CHARS]
        msg = words(raw)
        msg_stems = {stem(w) for w in msg}
        ranked: list[tuple[int, float, str, str | None]] = []
        for sk in skills:
            name_parts, phrases, desc, trig, sk_profile = self._skill_terms(sk)
            score = 0.0
            if name_parts and name_parts <= msg:
                score += 3.0
            for ph in phrases:
                if ph <= msg:
                    score += 3.0
            score += min(len(trig & msg_stems), 3) * 1.5
            if score and profile is not None and sk_profile == profile:
                score += 1.5
            score += min(len(desc & msg), 3) * 1.0
            if score >= 2.0:
                ranked.append((source_rank(sk.source), -score * max(sk.weight, 0.1), sk.name, sk_profile))
        ranked.sort()
        chosen: list[str] = []
        served: dict[str, int] = {}
        for rank, _neg, name, sk_profile in ranked:
            if sk_profile is not None and served.get(sk_profile, rank) < rank:
                continue  # a higher source's skill does this job
            if sk_profile is not None:
                served.setdefault(sk_profile, rank)
            chosen.append(name)
        return chosen[:limit]

    def _skill_terms(self, sk: SkillInfo) -> tuple[set[str], list[set[str]], set[str], set[str], str | None]:
        cached = self._skill_cache.get(sk)
        if cached is None:
            name_parts = {w for w in words(re.sub(r"[-_.]", " ", sk.name)) if w not in _STOP}
            phrases = [words(k) - _STOP for k in sk.keywords if words(k) - _STOP]
            desc = {w for w in words(sk.description) if len(w) >= 4 and w not in _STOP}
            trig = trigger_terms(sk.trigger)
            sk_profile = None
            if sk.trigger or sk.description:
                _intent, p, conf = self.classify(f"{sk.description}. {_NEGATION.sub(' ', sk.trigger)}")
                sk_profile = p if conf >= 0.35 or p == "conversation" else None
            cached = self._skill_cache[sk] = (name_parts, phrases, desc, trig, sk_profile)
        return cached
