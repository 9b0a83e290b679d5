"""Status, inspect and doctor say which copy is loaded, from where, at which commit, and whether
the host runs trove; inspect lists externalized refs with readability and the redaction state."""
from __future__ import annotations

from pathlib import Path

from conftest import ROOT, assistant, make_config, make_engine, tool_call, tool_result, user

from hermes_trove.ops import doctor, install, status
from hermes_trove.ops.handlers import trove_inspect
from hermes_trove.payloads.redact import describe_config
from hermes_trove.runtime import build_runtime
from hermes_trove.toolkit import ToolContext


def test_status_and_doctor_name_path_version_git_and_the_host_verdict(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    rt.db.connect()
    (tmp_path / "config.yaml").write_text("context:\n  engine: compressor\n", encoding="utf-8")
    plugin = status.build_status(rt)["plugin"]
    assert plugin["plugin_path"] == str(ROOT) and plugin["plugin_version"]
    assert {"plugin_git_commit", "plugin_git_branch", "plugin_git_dirty"} <= set(plugin)
    assert plugin["host"]["verdict"].startswith("fallback") and "context.engine trove" in plugin["host"]["verdict"]
    report = doctor.run_doctor(rt)
    check = next(c for c in report["checks"] if c["check"] == "plugin_identity")
    assert check["status"] == "warn" and str(ROOT) in check["detail"] and report["plugin"]["route"]
    (tmp_path / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    make_engine(rt, session="s1")
    assert status.build_status(rt)["plugin"]["host"]["verdict"].startswith("serving")


def test_git_identity_is_null_and_silent_outside_a_checkout(tmp_path, monkeypatch):
    install.git_identity.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert install.git_identity(str(tmp_path)) == {"plugin_git_commit": None, "plugin_git_branch": None,
                                                  "plugin_git_dirty": None}
    install.git_identity.cache_clear()


def test_a_second_copy_in_the_plugins_dir_is_reported_loudly(tmp_path):
    other = tmp_path / "plugins" / "hermes-trove"
    other.mkdir(parents=True)
    (other / "plugin.yaml").write_text("name: hermes-trove\nkind: standalone\n", encoding="utf-8")
    rt = build_runtime(make_config(tmp_path))
    rt.db.connect()
    ident = install.identity_section(rt)
    assert len(ident["copies"]) >= 2 and ident["copies"][0]["path"] == str(ROOT.resolve())
    assert "MORE THAN ONE hermes-trove COPY" in ident["warning"] and str(other) in ident["warning"]
    check = next(c for c in doctor.run_doctor(rt)["checks"] if c["check"] == "plugin_identity")
    assert check["status"] == "warn" and "MORE THAN ONE" in check["detail"]


def test_the_skill_is_linked_into_the_index_once_and_never_over_something_else(tmp_path):
    assert install.expose_skill(ROOT, str(tmp_path)) == "linked"
    link = tmp_path / "skills" / "hermes-trove"
    assert link.is_symlink() and (link / "SKILL.md").exists()
    assert install.expose_skill(ROOT, str(tmp_path)) == "present"
    assert install.skill_section(ROOT, str(tmp_path))["in_index"] is True
    mine = tmp_path / "h2" / "skills" / "hermes-trove"
    mine.mkdir(parents=True)
    assert install.expose_skill(ROOT, str(tmp_path / "h2")) == "present" and not mine.is_symlink()


def test_inspect_reports_identity_refs_readability_and_redaction(tmp_path):
    rt = build_runtime(make_config(tmp_path, large_output_externalization_enabled=True,
                                   large_output_externalization_threshold_chars=2000))
    eng = make_engine(rt, session="s1")
    big = "line of output\n" * 400
    eng.ingest([user("run it"), assistant("", [tool_call("c1", "shell")]), tool_result("c1", big, name="shell"),
                assistant("", [tool_call("c2", "shell")]), tool_result("c2", big + "x", name="shell")])
    snap = eng.snapshot()
    ctx = ToolContext(runtime=rt, session=eng.state.key, snapshot=snap, complete=None)
    out = trove_inspect(ctx, {})
    refs = out["externalized_refs"]["refs"]
    assert len(refs) == 2 and all(r["readable"] for r in refs)
    victim = Path(out["externalized_refs"]["payload_dir"]) / refs[0]["ref"]
    victim.unlink()
    out = trove_inspect(ctx, {})
    assert out["externalized_refs"]["unreadable"] == 1
    assert [r["readable"] for r in out["externalized_refs"]["refs"]].count(False) == 1
    assert out["redaction"] == describe_config(rt.config) and out["plugin"]["plugin_path"] == str(ROOT)


def test_two_copies_advice_removes_only_the_copy_that_does_not_serve(tmp_path, monkeypatch):
    import hermes_trove

    other = tmp_path / "plugins" / "hermes-trove"
    other.mkdir(parents=True)
    (other / "plugin.yaml").write_text("name: hermes-trove\nkind: standalone\n", encoding="utf-8")
    rt = build_runtime(make_config(tmp_path))
    rt.db.connect()
    monkeypatch.setitem(hermes_trove.LOAD_STATE, "registered", True)  # this copy loaded in this Hermes
    ident = install.identity_section(rt)
    assert "hermes plugins remove hermes-trove" in ident["advice"] and str(other) in ident["advice"]
    assert "pip uninstall" not in ident["advice"]  # the loaded (serving) copy is never the one removed
    check = next(c for c in doctor.run_doctor(rt)["checks"] if c["check"] == "plugin_identity")
    assert check["status"] == "warn"
    guidance = next(g for g in doctor.run_doctor(rt)["guidance"] if g.startswith("plugin_identity"))
    assert "loaded fine" in guidance and "hermes plugins remove hermes-trove" in guidance
    monkeypatch.setitem(hermes_trove.LOAD_STATE, "registered", False)  # not known to load: remove nothing yet
    advice = install.identity_section(rt)["advice"]
    assert "remove a copy only after" in advice and "hermes plugins remove" not in advice


def test_removal_commands_follow_the_route():
    assert "pip uninstall hermes-trove" in install.removal_command({"route": "pip", "path": "/x"}, "/h")
    assert install.removal_command({"route": "link", "path": "/x"}, "/h").startswith("`rm /h/plugins/hermes-trove`")
    assert "hermes plugins remove" in install.removal_command({"route": "plugins-dir", "path": "/x"}, "/h")
