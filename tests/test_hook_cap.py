"""The pre-answer context stays within the host's cap on hook text (``hooks.output_spill``)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import assistant, make_config, make_engine, user

from hermes_trove import tokens
from hermes_trove.compaction.assembly import SUMMARY_FOOTER, SUMMARY_MARKER
from hermes_trove.hookcap import DEFAULT_CAP, ContextBudget, spill_cap
from hermes_trove.hooks import make_hooks, recall_policy
from hermes_trove.runtime import build_runtime


def compacted(home: Path):
    """A session with many summary nodes, and the hook's context for a fresh turn that shows none of them."""
    def model(messages, name, timeout_s, max_tokens):
        return "\n".join(f"point {k}: the turns went on about their topics" for k in range(8))

    rt = build_runtime(make_config(home))
    eng = make_engine(rt, model, session="s1")
    msgs: list[dict] = []
    for r in range(5):  # a compaction each round: several summary nodes
        msgs += [m for i in range(20) for m in (user(f"turn {r}.{i} about topic {i}: " + "word " * 150),
                                                assistant(f"reply {i}"))]
        eng.ingest(msgs)
        msgs = eng.compress(msgs, current_tokens=tokens.count_messages(msgs), force=True)
    context = make_hooks(rt)["pre_llm_call"](session_id="s1", platform="cli", user_message="next",
                                             conversation_history=[user("next")])
    return rt, context["context"]


def assert_whole_lines(rt, block: str) -> None:
    """Each node the block shows is whole, or its first whole lines and a line saying how many follow;
    the newest node is the one kept."""
    nodes = {n.node_id: n for n in rt.dag.frontier("s1")}
    labels = list(re.finditer(r"\[d\d+ node (\d+) \|[^\n]*\]\n", block))
    assert labels, block
    for at, label in enumerate(labels):
        end = labels[at + 1].start() if at + 1 < len(labels) else block.rindex(SUMMARY_FOOTER)
        body, summary = block[label.end():end].rstrip("\n"), nodes[int(label.group(1))].summary
        if body != summary:
            *head, note = body.split("\n")
            assert head and head == summary.splitlines()[:len(head)], (head, summary)
            more = len(summary.splitlines()) - len(head)
            assert note.startswith(f"[... {more} more line") and f"trove_expand(node_id={label.group(1)})" in note
    newest = max(nodes.values(), key=lambda n: (n.latest_at or 0.0, n.node_id))
    assert str(newest.node_id) in [m.group(1) for m in labels]
    if len(nodes) > len(labels):
        assert f"({len(nodes) - len(labels)} older summary nodes are not shown" in block


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text, encoding="utf-8")


def test_a_context_over_a_lowered_cap_keeps_the_policy_and_sheds_whole_summary_nodes(tmp_path, monkeypatch):
    # A user who sets hooks.output_spill.max_chars to 2,000 had the policy and up to ~6,000 characters of
    # summary injected together: the host cut that to a head and tail preview (a truncated summary) and
    # wrote a spill file every turn. The parts now go in by importance, each whole: the policy, then as
    # many of the newest summary nodes as fit, the rest named as omitted.
    open_home = tmp_path / "open"
    write_config(open_home, "hooks:\n  output_spill:\n    enabled: false\n")
    monkeypatch.setenv("HERMES_HOME", str(open_home))
    _, uncapped = compacted(open_home)
    assert len(uncapped) > 2000  # what the cap must change

    home = tmp_path / "capped"
    write_config(home, "hooks:\n  output_spill:\n    max_chars: 2000\n")
    monkeypatch.setenv("HERMES_HOME", str(home))
    rt, context = compacted(home)
    assert len(context) <= 2000, len(context)
    policy = recall_policy()
    assert context.startswith(policy + "\n\n")
    block = context[len(policy) + 2:]
    assert block.startswith(SUMMARY_MARKER) and block.endswith(SUMMARY_FOOTER), block
    assert_whole_lines(rt, block)

    from tools.hook_output_spill import get_spill_config, spill_if_oversized
    assert spill_if_oversized(context, session_id="s1", source="plugin hook", config=get_spill_config()) == context
    assert not (home / "hook_outputs").exists()


def test_a_cap_below_the_policy_leaves_the_policy_out_and_still_brings_what_fits(tmp_path, monkeypatch):
    home = tmp_path / "home"
    write_config(home, "hooks:\n  output_spill:\n    max_chars: 700\n")
    monkeypatch.setenv("HERMES_HOME", str(home))
    assert len(recall_policy()) > 700
    rt, context = compacted(home)
    assert len(context) <= 700 and "TROVE recall policy" not in context
    assert context.startswith(SUMMARY_MARKER) and context.endswith(SUMMARY_FOOTER), context
    assert_whole_lines(rt, context)


@pytest.mark.parametrize(("config", "cap"), [
    (None, DEFAULT_CAP), ({}, DEFAULT_CAP), ({"hooks": {"output_spill": {"max_chars": 2000}}}, 2000),
    ({"hooks": {"output_spill": {"max_chars": "3000"}}}, 3000), ({"hooks": {"output_spill": {"max_chars": 0}}},
                                                                 DEFAULT_CAP),
    ({"hooks": {"output_spill": {"max_chars": "lots"}}}, DEFAULT_CAP), ({"hooks": {"output_spill": "x"}}, DEFAULT_CAP),
    ({"hooks": {"output_spill": {"enabled": False, "max_chars": 10}}}, None),
    ({"hooks": {"output_spill": {"enabled": None, "max_chars": 10}}}, 10),
])
def test_the_cap_is_read_as_the_host_reads_it(config, cap):
    from tools.hook_output_spill import DEFAULT_MAX_CHARS, _coerce_positive_int

    assert DEFAULT_CAP == DEFAULT_MAX_CHARS
    assert spill_cap(config) == cap
    section = ((config or {}).get("hooks") or {}).get("output_spill")
    if isinstance(section, dict) and section.get("enabled", True) is not False:
        assert cap == _coerce_positive_int(section.get("max_chars"), DEFAULT_MAX_CHARS)


def test_a_budget_counts_the_separators_between_parts():
    budget = ContextBudget(10)
    assert budget.room() == 10 and budget.take("abcd")  # 4
    assert budget.room() == 4 and not budget.take("abcde") and budget.take("abcd")  # 4 + 2 + 4 = 10
    assert budget.room() == 0 and not budget.take("a")
    assert ContextBudget(None).room() is None and ContextBudget(None).take("x" * 100000)


def test_a_config_yaml_broken_mid_run_keeps_the_cap_the_host_keeps(tmp_path, monkeypatch):
    # Hermes keeps serving the config it last read in the process while config.yaml does not parse (a user
    # mid-edit), so its cap stays the lowered one; trove read such a file as no settings at all and budgeted
    # the default 10,000 characters, which the host then spilled.
    from tools.hook_output_spill import get_spill_config

    from hermes_trove.hookcap import host_spill_cap

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    path = home / "config.yaml"
    path.write_text("hooks:\n  output_spill:\n    max_chars: 2000\n", encoding="utf-8")
    assert get_spill_config()["max_chars"] == host_spill_cap() == 2000
    path.write_text("hooks:\n  output_spill:\n    max_chars: 2000\n bad: [\n", encoding="utf-8")
    assert get_spill_config()["max_chars"] == 2000  # the host's last-known-good
    assert host_spill_cap() == 2000
    path.write_text("hooks:\n  output_spill:\n    max_chars: 3000\n", encoding="utf-8")
    assert get_spill_config()["max_chars"] == host_spill_cap() == 3000  # fixed: read again
