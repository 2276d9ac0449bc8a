"""decode_outbound: artifacts go, prose stays byte for byte, and streaming equals batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawkit_translation.clawdense import ClawDense, Lexicon
from clawkit_translation.scrubber import OutboundScrubber, scrub, scrub_chunks

CORPUS = [r for r in (Path(__file__).parent / "data" / "ordinary_replies.txt").read_text("utf-8").split("\n=====\n")]


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 100


@pytest.mark.parametrize("reply", CORPUS, ids=range(len(CORPUS)))
def test_ordinary_replies_are_untouched(reply):
    assert scrub(reply) == (reply, 0)
    # and when streamed word by word or char by char
    assert scrub_chunks(reply.split(" ")[:1] + [" " + w for w in reply.split(" ")[1:]]) == reply
    assert scrub_chunks(list(reply)) == reply


ARTIFACTS = [
    ('CT/1 REQ web_search q="nodejs vuln" limit=5\nHere are the results.', "Here are the results."),
    ("Sure.\nCT/1 ERR code=timeout tool=web_search elapsed=30s retry=true\nTrying again.", "Sure.\nTrying again."),
    ('CT/1 RES web_search\n---\n{"results": [1, 2,\n  3]}\nThe answer is 3.', "The answer is 3."),
    ("[ClawTalk routing: intent=weather, profile=research, confidence=0.91]\nIt is sunny in Paris.", "It is sunny in Paris."),
    ("Sure! [ClawTalk routing: intent=web_search] Here you go.", "Sure! Here you go."),
    ('?web:s q="paris weather" n=3\nIt is sunny.', "It is sunny."),
    ("<=@fs:r p=src/app.py\nThe file has 3 functions.", "The file has 3 functions."),
    (">>$sub(researcher) goal=\"find sources\"\nI asked the researcher.", "I asked the researcher."),
    ("!! code=timeout t=web_search\nThat timed out.", "That timed out."),
    ("~ run=a3f pg=0.7 ph=research\nStill working.", "Still working."),
    ("ok?mem:s q=prefs\nYou prefer tea.", "You prefer tea."),
    ("Before\n```\nCT/1 REQ kept_in_code x=1\n```\nCT/1 ACK\nAfter", "Before\n```\nCT/1 REQ kept_in_code x=1\n```\nAfter"),
    ("CT/1 REQ x\n---\nnot json, a horizontal rule", "---\nnot json, a horizontal rule"),
]


@pytest.mark.parametrize("raw,clean", ARTIFACTS)
def test_artifacts_are_stripped(raw, clean):
    out, n = scrub(raw)
    assert out == clean and n >= 1
    assert scrub_chunks(list(raw)) == clean


def test_lexicon_opcodes_are_recognised():
    codec = ClawDense(Lexicon(mappings={"?wx:f": "get_forecast"}))
    assert scrub("?wx:f loc=Paris\nSunny.", codec)[0] == "Sunny."
    # without the lexicon the line is still ClawDense by the notation's grammar (issue 27 item 4: the
    # recogniser is the grammar, not a list of known opcodes) — changed deliberately
    assert scrub("?wx:f loc=Paris\nSunny.")[0] == "Sunny."
    assert scrub("?wx: f loc=Paris\nSunny.")[0] == "?wx: f loc=Paris\nSunny."  # not the grammar: prose


def test_streaming_buffers_only_possible_artifact_starts():
    s = OutboundScrubber()
    assert s.feed("Hello there, ") == "Hello there, "  # prose streams at once
    assert s.feed("friend.\n") == "friend.\n"
    assert s.feed("CT/1 R") == ""  # could be a header: held
    assert s.feed("EQ web_search q=x\nDone") == "Done"
    assert s.feed(" [Claw") == " "  # could be an inline annotation: "[Claw" held
    assert s.feed("Talk routing: x] and more") == "and more"
    assert s.feed("\n?") == "\n"
    assert s.feed("no, a question") == "?no, a question"
    assert s.flush() == "" and s.stripped == 2


pieces = st.sampled_from(
    ["CT/1 ", "REQ ", "web_search ", 'q="a b" ', "\n", "---", "{", '"k":', "1}", "[ClawTalk routing: x]", " ", "ok", "?web:s",
     ">>", "$sub(r)", "```", "~", "!! ", "code=1", "hello", "a:b(c)", "[", "]", "-", "x@y.z", "> ", "\t"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(pieces, st.text(max_size=6)), max_size=25), st.data())
def test_any_chunking_gives_the_batch_result(parts, data):
    text = "".join(parts)
    expected, _ = scrub(text)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    chunks, last = [], 0
    for c in cuts + [len(text)]:
        chunks.append(text[last:c])
        last = c
    assert scrub_chunks(chunks) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(pieces, st.text(max_size=6)), max_size=25))
def test_the_cheap_precheck_never_skips_an_artifact(parts):
    """scrub() returns texts the pre-check clears untouched: the full scrubber must agree."""
    from clawkit_translation.scrubber import may_contain_artifacts

    text = "".join(parts)
    s = OutboundScrubber()
    full = s.feed(text) + s.flush()
    if not may_contain_artifacts(text):
        assert (full, s.stripped) == (text, 0)
    assert scrub(text) == (full, s.stripped)
