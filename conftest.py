"""How the whole suite is spread over pytest-xdist workers (``pytest -q -n 3``); it changes no test.

* Slow first: the modules that take longest (measured with ``--durations``) start first, then the
  other end-to-end (``e2e``) modules, then the rest, so the run does not end with one worker still
  in a two-minute CLI test while the others are idle. Within a module the order is unchanged.
* One worker per module fixture: a module whose tests share an expensive module- or class-scoped
  fixture (a batch of CLI runs made once for the module, a browser, an index) goes to one worker as
  one unit (``xdist_group``, ``--dist loadgroup``); spread over three workers, each would build it
  again. Cheap shared fixtures (``CHEAP_SHARED``) do not group their modules.
* Single-test units are handed out one at a time (``loadgroup`` schedules units, not chunks of
  consecutive tests), so no worker is sent a long run of slow tests up front.

Only the order and the worker of a test change: the same tests run with the same fixtures. An
explicit ``--dist`` other than the default ``load`` is respected; ``-n 0`` runs in this order too.
"""

from __future__ import annotations

import pytest

# The slowest modules of the suite, slowest first (seconds in a full ``-n 3`` run, from
# ``--durations=80``). A module missing here only starts later; the list never selects tests.
SLOW_MODULES = [
    "tests/test_cli_exits.py",
    "plugins/builtin/workers/tests/test_workers_e2e.py",
    "kernel/tests/test_cassette.py",
    "tests/test_cli_e2e.py",
    "plugins/builtin/subagents/tests/test_subagents_e2e.py",
    "plugins/builtin/workers/tests/test_pgstream_serve_stream_e2e.py",
    "plugins/builtin/subagents/tests/test_children_confinement.py",
    "tests/test_cli_workspace_options.py",
    "tests/test_typed_output_e2e.py",
    "tests/test_exits_e2e.py",
    "tests/security/test_seeds2_endpoint_url.py",
    "tests/test_fallback_anthropic_e2e.py",
    "tests/test_isolated_install.py",
    "tests/test_pyagent_replay.py",
    "tests/test_chat_skill_reload.py",
    "plugins/builtin/compaction/tests/test_compaction.py",
    "tests/test_sandbox_escape.py",
    "plugins/builtin/workers/tests/test_serve_queue_e2e.py",
    "plugins/builtin/workers/tests/test_queue_request_settings_e2e.py",
    "tests/test_fallback_e2e.py",
    "tests/test_attach_e2e.py",
    "plugins/builtin/serve/tests/test_panel_states.py",
    "plugins/builtin/memory/tests/test_memory_docs_eval.py",
    "tests/test_long_tasks_e2e.py",
    "tests/test_websearch_episodes_e2e.py",
    "plugins/builtin/mcp/tests/test_taint_mcp_descriptions.py",
    "tests/test_composition_e2e.py",
    "plugins/builtin/litellm/tests/test_attach_litellm.py",
    "tests/security/test_seeds_directives.py",
    "tests/security/test_budgets_usage_estimated_e2e.py",
    "plugins/builtin/translation/tests/test_translation_codec.py",
    "tests/test_scale_out_docs.py",
    "plugins/builtin/workers/tests/test_ops_queue_trace_usage_e2e.py",
    "tests/test_websearch_embeddings_e2e.py",
    "tests/security/test_injection.py",
    "plugins/builtin/litellm/tests/test_litellm.py",
    "plugins/builtin/classifier/tests/test_classifier_e2e.py",
]
_RANK = {path: i for i, path in enumerate(SLOW_MODULES)}
_SHARED_SCOPES = ("module", "class", "package")
# module fixtures that cost next to nothing to build again (a loopback server, a folder) or whose
# module's tests are each slow enough that spreading them wins (kernel_wheel): not worth a group
CHEAP_SHARED = {"server", "servers", "model", "append_model", "audit_home", "collector", "http_server", "search_server", "sections",
                "kernel_wheel"}


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # a worker parses the command line again (dist "no" there): it adds the group names
        # to the test ids only when told the controller schedules by group
        if workerinput.get("clawkit_loadgroup"):
            config.option.loadgroup = True
        return
    # the controller of an xdist run: "load" is what -n gives when no --dist is given
    import os
    import shlex

    given = [*config.invocation_params.args, *config.getini("addopts"), *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    if getattr(config.option, "dist", "no") == "load" and not any(
            a in ("--dist", "-d", "--load") or a.startswith("--dist=") for a in given):
        config.option.dist = "loadgroup"
        config.option.loadscopereorder = False  # keep the slow-first order below


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist, on the controller, before a worker starts: pass on the scheduling chosen above."""
    node.workerinput["clawkit_loadgroup"] = node.config.getoption("dist") == "loadgroup"


def _module_path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shares_a_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name, defs in info.name2fixturedefs.items():
        if defs and defs[-1].scope in _SHARED_SCOPES and name not in CHEAP_SHARED:
            return True
    return False


def _suffix_group(item: pytest.Item, group: str) -> None:
    """The test id the controller groups by (``<id>@<group>``). pytest-xdist 3.8 writes it to
    ``item._nodeid``, which pytest 9 no longer reads (the id lives in ``item._id``), so its
    ``xdist_group`` has no effect there; this sets the id where pytest 9 reads it."""
    node_id = getattr(item, "_id", None)
    if node_id is None or "@" in str(node_id).rsplit("]", 1)[-1]:
        return  # an older pytest (xdist's own hook does it) or already suffixed
    import dataclasses

    grouped_id = dataclasses.replace(node_id)
    object.__setattr__(grouped_id, "_str_cache", f"{node_id}@{group}")
    item._id = grouped_id


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first_seen: dict[str, int] = {}
    grouped: set[str] = set()
    for i, item in enumerate(items):
        path = _module_path(item)
        first_seen.setdefault(path, i)
        if path not in grouped and _shares_a_fixture(item):
            grouped.add(path)
    loadgroup = bool(config.getvalue("loadgroup")) if hasattr(config, "workerinput") else False
    for item in items:
        path = _module_path(item)
        if path in grouped and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(path))
            if loadgroup:
                _suffix_group(item, path)

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        i, item = pair
        path = _module_path(item)
        if path in _RANK:
            tier, rank = 0, _RANK[path]
        elif item.get_closest_marker("e2e"):
            tier, rank = 1, 0
        else:
            tier, rank = 2, 0
        return tier, rank, first_seen[path]

    items[:] = [item for _, item in sorted(enumerate(items), key=lambda p: (key(p), p[0]))]
