"""``TroveConfig`` and ``load_config``: typed fields, the derived SPEC, parsing, warnings, derived paths."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from hermes_trove.config import (
    BY_NAME,
    SPEC,
    TroveConfig,
    database_path,
    load_config,
    payload_dir,
    public_view,
    stranded_store,
)

NOT_VARIABLES = {"hermes_home", "sources", "warnings"}


def load(env: dict[str, str], home: str = "/h") -> tuple[TroveConfig, list[str]]:
    warned: list[str] = []
    return load_config(env, hermes_home=home, warn=warned.append), warned


class TestTheFieldTable:
    def test_every_field_but_three_is_a_variable_named_after_it(self):
        for f in dataclasses.fields(TroveConfig):
            if f.name in NOT_VARIABLES:
                assert "doc" not in f.metadata
            else:
                assert BY_NAME["TROVE_" + f.name.upper()].field == f.name

    def test_spec_lists_the_variable_fields_in_declaration_order(self):
        fields = [f.name for f in dataclasses.fields(TroveConfig) if f.name not in NOT_VARIABLES]
        assert [v.field for v in SPEC] == fields
        assert len(BY_NAME) == len(SPEC) and BY_NAME["TROVE_FRESH_TAIL_COUNT"].field == "fresh_tail_count"

    def test_the_annotation_decides_the_kind(self):
        assert BY_NAME["TROVE_CONTEXT_THRESHOLD"].kind == "float"
        assert BY_NAME["TROVE_FRESH_TAIL_COUNT"].kind == "int"
        assert BY_NAME["TROVE_ENABLE_SLASH_COMMAND"].kind == "bool"
        assert BY_NAME["TROVE_SUMMARY_MODEL"].kind == "str"
        assert BY_NAME["TROVE_SENSITIVE_PATTERNS"].kind == "csv"

    def test_every_default_has_the_type_of_its_kind(self):
        types = {"bool": bool, "int": int, "float": (int, float), "str": str, "csv": tuple}
        for v in SPEC:
            assert isinstance(v.default, types[v.kind]), v.name
            assert v.kind == "bool" or not isinstance(v.default, bool), v.name

    def test_every_default_lies_inside_its_range(self):
        for v in SPEC:
            assert v.minimum is None or v.default >= v.minimum, v.name
            assert v.maximum is None or v.default <= v.maximum, v.name

    def test_defaults_of_the_class_match_an_empty_environment(self):
        assert load_config({}, hermes_home="/h") == TroveConfig(hermes_home="/h")


class TestLoadConfig:
    def test_values_are_parsed_by_kind_and_recorded_as_from_the_environment(self):
        cfg, warned = load({"TROVE_CONTEXT_THRESHOLD": " 0.5 ", "TROVE_FRESH_TAIL_COUNT": "12",
                            "TROVE_DYNAMIC_LEAF_CHUNK_ENABLED": "Yes", "TROVE_SUMMARY_MODEL": " m1 ",
                            "TROVE_SUMMARY_FALLBACK_MODELS": "a, b,, c ,"})
        assert warned == [] and cfg.warnings == ()
        assert cfg.context_threshold == 0.5 and cfg.fresh_tail_count == 12
        assert cfg.dynamic_leaf_chunk_enabled is True and cfg.summary_model == "m1"
        assert cfg.summary_fallback_models == ("a", "b", "c")
        sources = dict(cfg.sources)
        assert sources["context_threshold"] == "env" and sources["incremental_max_depth"] == "default"

    @pytest.mark.parametrize("raw", ["0", "false", "NO", "off", ""])
    def test_false_spellings_turn_a_default_on_flag_off(self, raw):
        cfg, warned = load({"TROVE_EMPTY_LIFECYCLE_GC_ENABLED": raw})
        assert cfg.empty_lifecycle_gc_enabled is False and warned == []

    @pytest.mark.parametrize("name, raw, field", [
        ("TROVE_CONTEXT_THRESHOLD", "0.99", "context_threshold"),
        ("TROVE_CONTEXT_THRESHOLD", "lots", "context_threshold"),
        ("TROVE_FRESH_TAIL_COUNT", "0", "fresh_tail_count"),
        ("TROVE_FRESH_TAIL_COUNT", "3.5", "fresh_tail_count"),
        ("TROVE_INCREMENTAL_MAX_DEPTH", "65", "incremental_max_depth"),
        ("TROVE_ENABLE_SLASH_COMMAND", "maybe", "enable_slash_command"),
        ("TROVE_RECALL_FUSION", "borda", "recall_fusion"),
        ("TROVE_EMBEDDING_PROVIDER", "magic", "embedding_provider"),
    ])
    def test_a_bad_value_warns_with_what_is_accepted_and_keeps_the_default(self, name, raw, field):
        cfg, warned = load({name: raw})
        assert getattr(cfg, field) == BY_NAME[name].default
        assert len(warned) == 1 and warned[0].startswith(f"{name}={raw!r} is invalid: expected ")
        assert cfg.warnings == tuple(warned) and dict(cfg.sources)[field] == "default (invalid env)"

    @pytest.mark.parametrize(("name", "meant"), [
        ("TROVE_CONTEXT_TRESHOLD", "TROVE_CONTEXT_THRESHOLD"),
        ("TROVE_EMBEDDING_ENABLED", "TROVE_EMBEDDINGS_ENABLED"),
        ("TROVE_MEMORYSCOPE", "TROVE_MEMORY_SCOPE"),
        ("TROVE_DATABSE_URL", "TROVE_DATABASE_URL"),
    ])
    def test_a_misspelled_variable_warns_with_the_setting_it_resembles(self, name, meant):
        cfg, warned = load({name: "0.5"})
        assert warned == [f"{name} is not a hermes-trove setting and is ignored; did you mean {meant}?"]
        assert cfg.warnings == tuple(warned) and cfg == load({})[0]

    def test_variables_far_from_every_setting_belong_to_something_else_and_stay_quiet(self):
        _, warned = load({"TROVE_TOKENIZER": "estimate", "TROVE_TEST_DATABASE_URL": "postgresql://127.0.0.1/t",
                          "TROVE_PG_PORT": "55432", "TROVE_SKIP_INSTALL": "1", "TROVE_": "", "OTHER_THING": "1"})
        assert warned == []

    def test_the_range_bounds_themselves_are_accepted(self):
        cfg, warned = load({"TROVE_INCREMENTAL_MAX_DEPTH": "-1", "TROVE_CONDENSATION_FANIN": "64"})
        assert (cfg.incremental_max_depth, cfg.condensation_fanin, warned) == (-1, 64, [])

    def test_the_warning_spells_the_accepted_range(self):
        _, warned = load({"TROVE_L2_BUDGET_RATIO": "2"})
        assert "a number in [0.05, 1]" in warned[0]
        _, warned = load({"TROVE_FRESH_TAIL_MAX_TOKENS": "-5"})
        assert "an integer in [0, inf]" in warned[0]

    def test_hermes_home_comes_from_the_argument_then_the_mapping(self):
        assert load_config({"HERMES_HOME": "/env"}, hermes_home="/arg").hermes_home == "/arg"
        assert load_config({"HERMES_HOME": "/env"}).hermes_home == "/env"
        assert load_config({}).hermes_home == str(Path.home() / ".hermes")


class TestDerivedValues:
    def test_the_database_defaults_to_trove_db_under_hermes_home(self):
        cfg, _ = load({})
        assert database_path(cfg) == Path("/h/trove.db")
        assert payload_dir(cfg) == Path("/h/trove-payloads")

    def test_explicit_paths_win_and_expand_the_home_directory(self):
        cfg, _ = load({"TROVE_DATABASE_PATH": "~/x/t.db"})
        assert database_path(cfg) == Path.home() / "x" / "t.db"
        assert payload_dir(cfg) == Path.home() / "x" / "trove-payloads"
        cfg = dataclasses.replace(cfg, large_output_externalization_path="/p")
        assert payload_dir(cfg) == Path("/p")

    def test_public_view_lists_every_variable_with_lists_for_csv(self):
        cfg, _ = load({"TROVE_IGNORE_SESSION_PATTERNS": "cron_*"})
        view = public_view(cfg)
        assert set(view) == {v.name for v in SPEC}
        assert view["TROVE_IGNORE_SESSION_PATTERNS"] == {"value": ["cron_*"], "source": "env"}
        assert view["TROVE_FRESH_TAIL_COUNT"] == {"value": 32, "source": "default"}


class TestFrozen:
    def test_fields_cannot_be_assigned(self):
        cfg, _ = load({})
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.fresh_tail_count = 3  # type: ignore[misc]

    def test_replace_varies_one_field_and_rejects_unknown_names(self):
        cfg, _ = load({})
        assert dataclasses.replace(cfg, fresh_tail_count=3).fresh_tail_count == 3
        with pytest.raises(TypeError):
            dataclasses.replace(cfg, fresh_tail_cuont=3)

    def test_sources_and_warnings_do_not_take_part_in_equality(self):
        a, _ = load({"TROVE_CONTEXT_THRESHOLD": "bad"})
        b, _ = load({})
        assert a == b and a.warnings != b.warnings


FLOATS = [v for v in SPEC if v.kind == "float"]
INTS = [v for v in SPEC if v.kind == "int"]


class TestValidation:
    """Every numeric knob is finite, in range and consistent, else its default with a named warning."""

    @pytest.mark.parametrize("var", FLOATS, ids=lambda v: v.name)
    @pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
    def test_non_finite_floats_are_refused_for_every_float_knob(self, var, raw):
        cfg, warned = load({var.name: raw})
        value = getattr(cfg, var.field)
        assert value == var.default and math.isfinite(value)
        assert len(warned) == 1 and warned[0].startswith(f"{var.name}=") and "using default" in warned[0]

    @pytest.mark.parametrize("var", INTS, ids=lambda v: v.name)
    @pytest.mark.parametrize("raw", ["99999999999999999999", "-99999999999999999999", "1" * 5000])
    def test_absurd_integers_are_refused_for_every_int_knob(self, var, raw):
        cfg, warned = load({var.name: raw})
        assert getattr(cfg, var.field) == var.default
        assert len(warned) == 1 and var.name in warned[0] and len(warned[0]) < 400

    def test_a_nan_threshold_never_reaches_the_engine(self, tmp_path):
        from hermes_trove.engine import TroveEngine
        from hermes_trove.runtime import build_runtime

        cfg = load_config({"TROVE_CONTEXT_THRESHOLD": "nan", "TROVE_DATABASE_PATH": str(tmp_path / "t.db")},
                          hermes_home=str(tmp_path), warn=lambda m: None)
        eng = TroveEngine(build_runtime(cfg), complete=lambda *a: "x")
        eng.update_model("m", 64000)
        assert eng.threshold_tokens == int(64000 * 0.35)

    def test_a_dynamic_chunk_max_below_the_chunk_falls_back_with_a_named_warning(self):
        cfg, warned = load({"TROVE_LEAF_CHUNK_TOKENS": "30000", "TROVE_DYNAMIC_LEAF_CHUNK_MAX": "1000"})
        assert cfg.leaf_chunk_tokens == 30000 and cfg.dynamic_leaf_chunk_max == 40000
        assert len(warned) == 1 and warned[0].startswith("TROVE_DYNAMIC_LEAF_CHUNK_MAX=1000 ")
        assert "using default 40000" in warned[0]
        assert dict(cfg.sources)["dynamic_leaf_chunk_max"] == "default (inconsistent env)"

    def test_a_reserve_floor_larger_than_any_window_is_refused(self):
        cfg, warned = load({"TROVE_RESERVE_TOKENS_FLOOR": "50000000"})
        assert cfg.reserve_tokens_floor == 0 and "TROVE_RESERVE_TOKENS_FLOOR" in warned[0]

    def test_a_reserve_floor_larger_than_the_window_is_ignored_not_a_one_token_threshold(self, tmp_path):
        from hermes_trove.config import reserve_floor_cap
        from hermes_trove.engine import TroveEngine
        from hermes_trove.runtime import build_runtime

        cfg, warned = load({"TROVE_RESERVE_TOKENS_FLOOR": "200000",
                            "TROVE_DATABASE_PATH": str(tmp_path / "t.db")}, home=str(tmp_path))
        assert warned == [] and reserve_floor_cap(cfg, 128000) is None
        assert reserve_floor_cap(cfg, 1_000_000) == 800_000
        eng = TroveEngine(build_runtime(cfg), complete=lambda *a: "x")
        eng.update_model("m", 128000)
        assert eng.threshold_tokens == int(128000 * 0.35)

    def test_consistent_values_from_the_environment_stay(self):
        cfg, warned = load({"TROVE_LEAF_CHUNK_TOKENS": "1000", "TROVE_DYNAMIC_LEAF_CHUNK_MAX": "1000",
                            "TROVE_FRESH_TAIL_MAX_TOKENS": "64"})
        assert warned == [] and cfg.dynamic_leaf_chunk_max == 1000 and cfg.fresh_tail_max_tokens == 64


def test_a_relative_store_path_names_one_file_under_the_home_whatever_directory_a_process_starts_in(tmp_path,
                                                                                                    monkeypatch):
    """The gateway, a cron job and `hermes` typed in any project directory read the same .env: a relative
    TROVE_DATABASE_PATH (or payload path) must not give each working directory a store of its own."""
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    home = tmp_path / "home"
    home.mkdir()
    env = {"TROVE_DATABASE_PATH": "memory/trove.db", "TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH": "payloads"}
    for where in ("project-a", "project-b"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        cfg = load_config(env, hermes_home=str(home))
        assert database_path(cfg) == home / "memory" / "trove.db"
        assert payload_dir(cfg) == home / "payloads"
        runtime = build_runtime(cfg)
        if where == "project-a":
            runtime.store.ingest(SessionKey("s1", "", "cli"), [{"role": "user", "content": "the heron key"}])
        else:  # a later process elsewhere finds the turn the first one stored
            assert runtime.store.count("s1") == 1
    assert not (tmp_path / "project-a" / "memory").exists()


def test_a_store_left_at_the_old_working_directory_place_is_named_not_silently_lost(tmp_path, monkeypatch, capsys):
    """Before a relative TROVE_DATABASE_PATH was taken inside $HERMES_HOME, it named a file in the working
    directory: after the upgrade that file is no longer read, and its turns must not just vanish without a
    word: `hermes trove status` (no store yet), the doctor and the plugin's load name it and say what to do."""
    from hermes_trove import command
    from hermes_trove.ops.doctor import run_doctor
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    old = project / "memory" / "trove.db"
    old.parent.mkdir()
    earlier = build_runtime(load_config({"TROVE_DATABASE_PATH": str(old)}, hermes_home=str(home)))
    earlier.store.ingest(SessionKey("s1", "", "cli"), [{"role": "user", "content": "the heron key"}])
    monkeypatch.chdir(project)
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.setenv("TROVE_DATABASE_PATH", "memory/trove.db")
    assert command.main(["status"]) == command.EXIT_USAGE
    err = capsys.readouterr().err
    assert str(old) in err and str(home / "memory" / "trove.db") in err, err
    cfg = load_config({"TROVE_DATABASE_PATH": "memory/trove.db"}, hermes_home=str(home))
    report = run_doctor(build_runtime(cfg))
    check = next(c for c in report["checks"] if c["check"] == "config_validation")
    assert check["status"] == "warn" and str(old) in check["detail"], check
    # the store in use, an absolute path or a store in the old place that is the one in use: nothing to say
    assert stranded_store(dataclasses.replace(cfg, database_path=str(old))) == ""
    monkeypatch.chdir(home)
    assert stranded_store(cfg) == ""


def test_a_payload_directory_left_at_the_old_working_directory_place_is_named(tmp_path, monkeypatch):
    # payload refs are read against the payload directory in use: files left at the old place no longer expand
    (tmp_path / "payloads").mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = load_config({"TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH": "payloads"}, hermes_home=str(tmp_path / "home"))
    note = stranded_store(cfg)
    assert str(tmp_path / "payloads") in note and str(tmp_path / "home" / "payloads") in note, note
    assert stranded_store(cfg, cwd=str(tmp_path / "home")) == ""


def test_an_outbox_left_at_the_old_working_directory_place_is_named(tmp_path, monkeypatch):
    # with a server store the path places the outbox: unshipped messages left at the old place never ship
    from hermes_trove.outbox import outbox_path

    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "trove-outbox.db").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    cfg = load_config({"TROVE_DATABASE_PATH": "memory/trove.db", "TROVE_DATABASE_URL": "postgresql://h/db"},
                      hermes_home=str(tmp_path / "home"))
    note = stranded_store(cfg)
    assert str(tmp_path / "memory" / "trove-outbox.db") in note, note
    assert str(outbox_path(database_path(cfg).parent)) in note and "outbox" in note, note
    assert stranded_store(cfg, cwd=str(tmp_path / "home")) == ""


def test_a_deleted_working_directory_stops_no_stranded_store_check(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # os.getcwd() now raises
    cfg = load_config({"TROVE_DATABASE_PATH": "memory/trove.db"}, hermes_home=str(tmp_path / "home"))
    assert stranded_store(cfg) == ""


def test_the_payload_directory_beside_a_relative_store_left_at_the_old_place_is_named(tmp_path, monkeypatch):
    # TROVE_LARGE_OUTPUT_EXTERNALIZATION_PATH unset puts payloads beside the store: a relative store path moved
    # them into $HERMES_HOME as well, and refs to the files left in the working directory no longer expanded
    (tmp_path / "memory" / "trove-payloads").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    cfg = load_config({"TROVE_DATABASE_PATH": "memory/trove.db"}, hermes_home=str(home))
    note = stranded_store(cfg)
    assert str(tmp_path / "memory" / "trove-payloads") in note and str(payload_dir(cfg)) in note, note
    assert payload_dir(cfg) == home / "memory" / "trove-payloads"
    assert stranded_store(cfg, cwd=str(home)) == ""
    # a payload path of its own is checked as itself, not beside the store
    own = dataclasses.replace(cfg, large_output_externalization_path=str(tmp_path / "elsewhere"))
    assert stranded_store(own) == ""


def test_a_stranded_store_beside_a_store_in_use_is_not_to_be_moved_onto_it(tmp_path, monkeypatch):
    # both files hold turns: moving the old one to the new place, as the note said, replaced the store in use
    (tmp_path / "trove.db").write_bytes(b"old")
    home = tmp_path / "home"
    home.mkdir()
    (home / "trove.db").write_bytes(b"new")
    monkeypatch.chdir(tmp_path)
    cfg = load_config({"TROVE_DATABASE_PATH": "trove.db"}, hermes_home=str(home))
    note = stranded_store(cfg)
    assert str(tmp_path / "trove.db") in note and str(home / "trove.db") in note, note
    assert "move that" not in note and "do not move" in note and "absolute path" in note, note
    (home / "trove.db").unlink()
    assert "move that store" in stranded_store(cfg)
