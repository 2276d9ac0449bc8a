"""The provenance record that gates read: marked by whatever brings outside content in."""

from clawkit import provenance


class FakeSession:
    def __init__(self):
        self.metadata = {}

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def set(self, key, value, now=False):
        self.metadata[key] = value


class Broken:
    def get(self, key, default=None):
        raise RuntimeError("unreadable")


def test_first_mark_reports_first_and_sources_are_bounded():
    s = FakeSession()
    assert not provenance.is_untrusted(s)
    assert provenance.mark_untrusted(s, "read_file", "notes.txt", kind="file") is True
    assert provenance.mark_untrusted(s, "read_file", "notes.txt", kind="file") is False
    for i in range(50):
        provenance.mark_untrusted(s, "web_fetch", f"http://h/{i}", kind="web")
    assert provenance.is_untrusted(s)
    assert len(provenance.untrusted_sources(s)) == provenance.MAX_SOURCES
    assert s.metadata["untrusted"]["count"] == 52
    assert "`notes.txt` (untrusted file via read_file)" in provenance.describe(s)


def test_detection_alone_counts_and_unreadable_state_fails_closed():
    s = FakeSession()
    s.set("tainted", True)
    assert provenance.is_untrusted(s)
    assert provenance.is_untrusted(Broken())
    assert provenance.untrusted_sources(Broken())[0]["source"] == "unknown"
