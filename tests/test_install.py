"""scripts/install.sh and scripts/update.sh, run for real against a temporary HOME; and the
suite itself, run from a clone named like the README's (``hermes-trove``).

Each test builds a small stand-in checkout (the two scripts, a manifest, ``__init__.py``
and the bundled skill directory) so links never point at the working tree under test.
``update.sh`` is exercised with a local bare repository as its upstream.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required for the install scripts")


def make_checkout(where: Path) -> Path:
    """A minimal hermes-trove checkout at ``where`` carrying the real scripts."""
    (where / "scripts").mkdir(parents=True)
    for name in ("install.sh", "update.sh", "_target_home.sh"):
        shutil.copy2(SCRIPTS / name, where / "scripts" / name)
    (where / "plugin.yaml").write_text("name: hermes-trove\nkind: standalone\n", encoding="utf-8")
    (where / "__init__.py").write_text("def register(ctx):\n    pass\n", encoding="utf-8")
    skill = where / "skills" / "hermes-trove"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: hermes-trove\n---\nRecall skill.\n", encoding="utf-8")
    return where


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path / "src" / "hermes-trove")


def run(script: Path, home: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "GIT_"))}
    full.update(HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid", GIT_CONFIG_NOSYSTEM="1")
    full.update(env)
    return subprocess.run(["bash", str(script)], env=full, cwd=str(cwd or home), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def install(checkout: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run(checkout / "scripts" / "install.sh", home, **env)


def tree(path: Path) -> list[tuple[str, str]]:
    """Everything below ``path`` with link targets, to prove a refusal changed nothing."""
    out = []
    for p in sorted(path.rglob("*")):
        out.append((str(p.relative_to(path)), os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else "file"))
    return out


def test_install_links_the_checkout_and_the_skill_into_the_default_home(checkout, home):
    done = install(checkout, home)
    assert done.returncode == 0, done.stderr
    plugin, skill = home / ".hermes" / "plugins" / "hermes-trove", home / ".hermes" / "skills" / "hermes-trove"
    assert plugin.is_symlink() and plugin.resolve() == checkout.resolve()
    assert skill.is_symlink() and skill.resolve() == (checkout / "skills" / "hermes-trove").resolve()
    assert (skill / "SKILL.md").read_text(encoding="utf-8").startswith("---")
    assert "hermes plugins enable hermes-trove" in done.stdout
    assert "hermes config set context.engine trove" in done.stdout
    assert "restart" in done.stdout.lower()
    # the doctor has no database to check until a conversation has stored something
    assert "After the first conversation" in done.stdout and "trove doctor" in done.stdout


def test_install_twice_reports_the_links_and_changes_nothing(checkout, home):
    assert install(checkout, home).returncode == 0
    before = tree(home)
    again = install(checkout, home)
    assert again.returncode == 0, again.stderr
    assert "already linked" in again.stdout
    assert tree(home) == before


def test_install_honours_hermes_home(checkout, home, tmp_path):
    custom = tmp_path / "custom-home"
    done = install(checkout, home, HERMES_HOME=str(custom))
    assert done.returncode == 0, done.stderr
    assert (custom / "plugins" / "hermes-trove").resolve() == checkout.resolve()
    assert (custom / "skills" / "hermes-trove").is_symlink()
    assert not (home / ".hermes").exists()


def test_install_with_a_profile_targets_the_profile_home(checkout, home):
    done = install(checkout, home, HERMES_PROFILE="work")
    assert done.returncode == 0, done.stderr
    profile = home / ".hermes" / "profiles" / "work"
    assert (profile / "plugins" / "hermes-trove").resolve() == checkout.resolve()
    assert (profile / "skills" / "hermes-trove").resolve() == (checkout / "skills" / "hermes-trove").resolve()
    assert not (home / ".hermes" / "plugins").exists()
    assert "hermes -p work config set context.engine trove" in done.stdout  # the profile's own config


@pytest.mark.parametrize("hermes_home", ["custom", "custom/profiles/other", "inside"])
def test_install_with_a_profile_finds_the_profiles_where_the_host_keeps_them(checkout, home, hermes_home):
    """Hermes keeps profiles under ~/.hermes/profiles, or under $HERMES_HOME/profiles when HERMES_HOME
    is outside ~/.hermes (and under the root above it when HERMES_HOME is itself such a profile)."""
    if hermes_home == "inside":
        env_home, root = home / ".hermes" / "profiles" / "other", home / ".hermes"
    else:
        env_home = home.parent / hermes_home
        root = home.parent / "custom"
    env_home.mkdir(parents=True, exist_ok=True)
    done = install(checkout, home, HERMES_PROFILE="work", HERMES_HOME=str(env_home))
    assert done.returncode == 0, done.stderr
    profile = root / "profiles" / "work"
    assert (profile / "plugins" / "hermes-trove").resolve() == checkout.resolve(), done.stdout
    assert not (env_home / "plugins").exists()
    if hermes_home != "inside":
        assert not (home / ".hermes").exists()


def test_after_install_md_names_the_one_remaining_step_with_the_host_command():
    text = (ROOT / "after-install.md").read_text(encoding="utf-8")
    assert "hermes config set context.engine trove" in text and "hermes plugins enable hermes-trove" in text
    assert "```yaml" not in text


def test_install_rejects_a_profile_name_that_could_escape_the_profiles_directory(checkout, home):
    done = install(checkout, home, HERMES_PROFILE="../evil")
    assert done.returncode != 0
    assert "invalid HERMES_PROFILE" in done.stderr
    assert not (home / ".hermes").exists()


def test_install_refuses_an_existing_plugin_directory_and_links_nothing(checkout, home):
    occupied = home / ".hermes" / "plugins" / "hermes-trove"
    occupied.mkdir(parents=True)
    (occupied / "keep.txt").write_text("someone else's plugin", encoding="utf-8")
    before = tree(home)
    done = install(checkout, home)
    assert done.returncode != 0
    assert "already exists" in done.stderr and "nothing was changed" in done.stderr
    assert tree(home) == before
    assert not (home / ".hermes" / "skills").exists()


def test_install_refuses_a_plugin_link_to_another_checkout(checkout, home, tmp_path):
    other = make_checkout(tmp_path / "other")
    link = home / ".hermes" / "plugins" / "hermes-trove"
    link.parent.mkdir(parents=True)
    link.symlink_to(other)
    done = install(checkout, home)
    assert done.returncode != 0
    assert "is a link to" in done.stderr
    assert link.resolve() == other.resolve()
    assert not (home / ".hermes" / "skills").exists()


def test_install_refuses_a_conflicting_skill_before_linking_the_plugin(checkout, home):
    skill = home / ".hermes" / "skills" / "hermes-trove"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("a different skill", encoding="utf-8")
    done = install(checkout, home)
    assert done.returncode != 0
    assert "skills/hermes-trove" in done.stderr
    assert not (home / ".hermes" / "plugins").exists()
    assert (skill / "SKILL.md").read_text(encoding="utf-8") == "a different skill"


def test_install_refuses_a_dangling_link_at_the_plugin_path(checkout, home, tmp_path):
    link = home / ".hermes" / "plugins" / "hermes-trove"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "gone")
    done = install(checkout, home)
    assert done.returncode != 0
    assert os.readlink(link) == str(tmp_path / "gone")


def test_install_from_the_canonical_plugin_path_keeps_the_checkout_and_links_only_the_skill(home):
    canonical = make_checkout(home / ".hermes" / "plugins" / "hermes-trove")
    done = install(canonical, home)
    assert done.returncode == 0, done.stderr
    assert not canonical.is_symlink() and canonical.is_dir()
    assert "left in place" in done.stdout
    skill = home / ".hermes" / "skills" / "hermes-trove"
    assert skill.is_symlink() and skill.resolve() == (canonical / "skills" / "hermes-trove").resolve()


def test_install_refuses_a_directory_that_is_not_a_hermes_trove_checkout(home, tmp_path):
    bogus = tmp_path / "bogus"
    (bogus / "scripts").mkdir(parents=True)
    for name in ("install.sh", "_target_home.sh"):
        shutil.copy2(SCRIPTS / name, bogus / "scripts" / name)
    done = install(bogus, home)
    assert done.returncode != 0
    assert "does not look like a hermes-trove checkout" in done.stderr
    assert not (home / ".hermes").exists()


# -- update.sh ---------------------------------------------------------------------------

def git(*args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid", GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd))
    return subprocess.run(["git", *args], cwd=str(cwd), env=env, check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, Path]:
    """A bare upstream repository and a working copy that pushes to it."""
    bare = tmp_path / "upstream.git"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    author = make_checkout(tmp_path / "author")
    git("init", "-q", "-b", "main", cwd=author)
    git("add", "-A", cwd=author)
    git("commit", "-q", "-m", "first", cwd=author)
    git("remote", "add", "origin", str(bare), cwd=author)
    git("push", "-q", "origin", "main", cwd=author)
    return bare, author


def publish(author: Path, name: str, text: str) -> str:
    (author / name).write_text(text, encoding="utf-8")
    git("add", name, cwd=author)
    git("commit", "-q", "-m", "change " + name, cwd=author)
    git("push", "-q", "origin", "main", cwd=author)
    return git("rev-parse", "HEAD", cwd=author)


def test_update_fast_forwards_the_linked_checkout_and_rechecks_the_links(upstream, home, tmp_path):
    bare, author = upstream
    clone = tmp_path / "clone"
    git("clone", "-q", str(bare), str(clone), cwd=tmp_path)
    assert install(clone, home).returncode == 0
    head = publish(author, "NEWS.md", "new release\n")
    # Run a different copy of update.sh: it must follow the link, not update its own folder.
    elsewhere = make_checkout(tmp_path / "elsewhere")
    done = run(elsewhere / "scripts" / "update.sh", home)
    assert done.returncode == 0, done.stderr
    assert git("rev-parse", "HEAD", cwd=clone) == head
    assert (clone / "NEWS.md").exists()
    assert not (elsewhere / "NEWS.md").exists()
    assert "already linked" in done.stdout
    assert "Restart Hermes" in done.stdout


def test_update_without_a_link_pulls_the_current_checkout(upstream, home, tmp_path):
    bare, author = upstream
    clone = tmp_path / "clone"
    git("clone", "-q", str(bare), str(clone), cwd=tmp_path)
    head = publish(author, "NEWS.md", "second\n")
    done = run(clone / "scripts" / "update.sh", home)
    assert done.returncode == 0, done.stderr
    assert git("rev-parse", "HEAD", cwd=clone) == head
    assert (home / ".hermes" / "plugins" / "hermes-trove").resolve() == clone.resolve()


def test_update_refuses_a_diverged_checkout_and_leaves_it_alone(upstream, home, tmp_path):
    bare, author = upstream
    clone = tmp_path / "clone"
    git("clone", "-q", str(bare), str(clone), cwd=tmp_path)
    assert install(clone, home).returncode == 0
    publish(author, "NEWS.md", "upstream side\n")
    (clone / "LOCAL.md").write_text("local side\n", encoding="utf-8")
    git("add", "LOCAL.md", cwd=clone)
    git("commit", "-q", "-m", "local", cwd=clone)
    local_head = git("rev-parse", "HEAD", cwd=clone)
    done = run(clone / "scripts" / "update.sh", home)
    assert done.returncode != 0
    assert "git pull --ff-only failed" in done.stderr
    assert git("rev-parse", "HEAD", cwd=clone) == local_head


def test_update_reports_a_broken_plugin_link(checkout, home, tmp_path):
    link = home / ".hermes" / "plugins" / "hermes-trove"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "deleted-checkout")
    done = run(checkout / "scripts" / "update.sh", home)
    assert done.returncode != 0
    assert "broken link" in done.stderr


def test_the_checkout_is_imported_only_as_hermes_trove():
    """Neither pytest nor a test imported the checkout by its folder name or put it on sys.path."""
    assert ROOT not in {Path(p or ".").resolve() for p in sys.path}
    outside_the_package = (ROOT / "tests", ROOT / "scripts", ROOT / "bench", ROOT / ".venv")
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        path = Path(file).resolve() if file else None
        if path is None or not path.is_relative_to(ROOT) or any(path.is_relative_to(d) for d in outside_the_package):
            continue
        assert name == "hermes_trove" or name.startswith("hermes_trove."), f"{file} imported as {name}"
    host_tools = importlib.util.find_spec("tools")  # the host's package, never the checkout's tools.py
    assert host_tools is None or Path(host_tools.origin or "").resolve() != ROOT / "tools.py"


def test_the_suite_runs_from_a_checkout_named_like_the_readme_clone(tmp_path):
    clone = tmp_path / "hermes-trove"
    shutil.copytree(ROOT, clone, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".*_cache", "__pycache__", "*.egg-info", "build"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TROVE_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config_doc.py",
                           "tests/test_install.py::test_the_checkout_is_imported_only_as_hermes_trove"],
                          cwd=str(clone), env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
