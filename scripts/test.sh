#!/usr/bin/env bash
# The test command. Builds (or reuses) two virtualenvs in this checkout, then runs pytest over
# tests/ with the first:
#   .venv       hermes-trove installed editable with its test extras, plus hermes-agent==0.19.0:
#               the interpreter pytest and the unit tests run in.
#   .venv-host  hermes-agent==0.19.0 and the PostgreSQL driver ONLY: the real host the end-to-end suite starts. It must
#               not be able to import hermes_trove (checked on every run), so the e2e suite
#               loads the plugin the way Hermes users do, as the directory plugin
#               $HERMES_HOME/plugins/hermes-trove, and never through a shadowing pip copy.
#               Beside it, wheelhouse/ holds the build backend (setuptools) so the e2e
#               route tests can `pip install` the checkout offline.
# A whole-suite run lints first (scripts/lint.sh: ruff, mypy, lint-imports) and stops on any finding.
# Then, unless TROVE_TEST_DATABASE_URL is already set, a throwaway PostgreSQL server is started on
# 127.0.0.1 (scripts/pg_server.sh, a temp dir, the first free port from 55432 up) for the
# PostgreSQL tests, exported as TROVE_TEST_DATABASE_URL, and stopped and removed on exit. When it
# cannot start, those tests skip (with TROVE_PG_REQUIRED=1 the run fails instead).
#
#   scripts/test.sh                       # lint, then everything, end-to-end suite included
#   scripts/test.sh -m "not e2e"          # lint, then unit tests only
#   scripts/test.sh tests/test_store.py   # named paths replace tests/; no lint
#
# Environment: PYTHON (interpreter used to create the venvs, default python3.11 or python3),
# TROVE_VENV (test venv path, default .venv), TROVE_HOST_VENV (host venv path, default
# .venv-host), TROVE_SKIP_INSTALL=1 (use both venvs as they are), TROVE_SKIP_LINT=1 (skip the
# lint step). TROVE_E2E_PYTHON (the e2e host interpreter) defaults to .venv-host's python.
# TROVE_TEST_DATABASE_URL (a PostgreSQL server of your own: no server is started), TROVE_PG=0
# (start none: the PostgreSQL tests skip), TROVE_PG_REQUIRED=1 (no server is a failure, as in CI).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TROVE_VENV:-$ROOT/.venv}"
HOST_VENV="${TROVE_HOST_VENV:-$ROOT/.venv-host}"
HOST_PIN="hermes-agent==0.19.0"
BUILD_PIN="setuptools>=70.1"  # builds wheels without the separate `wheel` package
# The PostgreSQL driver, as a user adds it to Hermes' Python for TROVE_DATABASE_URL (the postgres extra).
PG_PIN="psycopg[binary]>=3.1"

say() { printf 'test.sh: %s\n' "$*" >&2; }

pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null 2>&1; then echo "$candidate"; return; fi
    done
    say "no python3 found on PATH"; exit 2
}

deps_fingerprint() {
    # Reinstall when the package metadata, the host pin or the interpreter changes.
    { cat "$ROOT/pyproject.toml"; echo "$HOST_PIN"; "$VENV/bin/python" -VV; } | sha256sum | cut -d' ' -f1
}

host_fingerprint() {
    # The host venv depends on the host pin, the build pin and its interpreter only.
    { echo "$HOST_PIN"; echo "$BUILD_PIN"; echo "$PG_PIN"; "$HOST_VENV/bin/python" -VV; } | sha256sum | cut -d' ' -f1
}

create_venv() {
    # create_venv DIR: a fresh venv made with a Python hermes-agent 0.19.0 accepts.
    local dir="$1" base
    [ -x "$dir/bin/python" ] && return
    base="$(pick_python)"
    if ! "$base" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)'; then
        say "$base is $("$base" -V 2>&1); hermes-agent 0.19.0 needs Python >=3.11,<3.14 (set PYTHON=...)"
        exit 2
    fi
    say "creating $dir with $("$base" -V 2>&1)"
    "$base" -m venv "$dir"
}

retry_once() {
    # retry_once CMD...: run CMD; on failure wait 10s and run it one more time.
    "$@" || { say "pip failed; retrying once in 10s"; sleep 10; "$@"; }
}

ensure_venv() {
    create_venv "$VENV"
    local stamp="$VENV/.trove-test-deps" want
    want="$(deps_fingerprint)"
    if [ "${TROVE_SKIP_INSTALL:-0}" = 1 ] || { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
        return
    fi
    say "installing hermes-trove (editable, [test,regex,embeddings,postgres]) and $HOST_PIN into $VENV"
    retry_once "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -e "$ROOT[test,regex,embeddings,postgres]" "$HOST_PIN"
    # The checkout root is the package: prove the editable mapping works from elsewhere.
    (cd / && "$VENV/bin/python" -c 'import hermes_trove, sys; sys.exit(0 if hasattr(hermes_trove, "register") else 1)') || {
        say "import hermes_trove failed in $VENV after the editable install"; exit 2; }
    echo "$want" > "$stamp"
}

ensure_host_venv() {
    create_venv "$HOST_VENV"
    # Tools that honour .gitignore (git, ruff) skip the venv, as python3.13's venv does itself.
    [ -f "$HOST_VENV/.gitignore" ] || echo '*' > "$HOST_VENV/.gitignore"
    local stamp="$HOST_VENV/.trove-host-deps" want
    want="$(host_fingerprint)"
    if [ "${TROVE_SKIP_INSTALL:-0}" != 1 ] && { [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; }; then
        say "installing $HOST_PIN and the PostgreSQL driver (and nothing else) into $HOST_VENV"
        retry_once "$HOST_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$HOST_PIN" "$PG_PIN"
        retry_once "$HOST_VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            --dest "$HOST_VENV/wheelhouse" "$BUILD_PIN"
        echo "$want" > "$stamp"
    fi
    # The host must load hermes-trove from a plugin directory: a copy it can import by name
    # (an editable or pip install) would shadow the directory plugin and hide its bugs.
    if (cd / && "$HOST_VENV/bin/python" -c 'import hermes_trove' >/dev/null 2>&1); then
        say "$HOST_VENV can import hermes_trove; it must hold only $HOST_PIN (remove it and rerun)"
        exit 2
    fi
    (cd / && "$HOST_VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("run_agent") else 1)') || \
        say "warning: $HOST_VENV cannot import the host (run_agent): the e2e suite will skip (CI: fail); remove it and rerun"
}

PG_DIR=""
stop_pg() {
    [ -n "$PG_DIR" ] || return 0
    bash "$ROOT/scripts/pg_server.sh" stop "$PG_DIR" || say "could not stop the PostgreSQL test server in $PG_DIR"
    PG_DIR=""
}

start_pg() {
    # Export TROVE_TEST_DATABASE_URL for the PostgreSQL tests: the caller's, or a throwaway server's.
    if [ -n "${TROVE_TEST_DATABASE_URL:-}" ]; then
        say "PostgreSQL tests use TROVE_TEST_DATABASE_URL (no server started)"
        return
    fi
    local required="${TROVE_PG_REQUIRED:-0}" log url
    if [ "${TROVE_PG:-1}" = 0 ]; then
        [ "$required" = 1 ] && { say "TROVE_PG=0 but TROVE_PG_REQUIRED=1: the PostgreSQL tests need a server"; exit 2; }
        say "no PostgreSQL test server (TROVE_PG=0): PostgreSQL tests will be skipped"
        return
    fi
    PG_DIR="$(mktemp -d /tmp/trove-pg.XXXXXX)"
    trap stop_pg EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    if [ "$required" = 1 ]; then
        # CI: the install and any failure are shown as they happen.
        url="$(bash "$ROOT/scripts/pg_server.sh" start "$PG_DIR")" || {
            say "the PostgreSQL test server did not start (TROVE_PG_REQUIRED=1); see above"; exit 2; }
        export TROVE_TEST_DATABASE_URL="$url"
        say "PostgreSQL test server at $url (stopped on exit)"
        return
    fi
    log="$(mktemp)"
    if url="$(bash "$ROOT/scripts/pg_server.sh" start "$PG_DIR" 2>"$log")"; then
        rm -f "$log"
        export TROVE_TEST_DATABASE_URL="$url"
        say "PostgreSQL test server at $url (stopped on exit)"
        return
    fi
    say "no PostgreSQL test server ($(grep -v '^\s*$' "$log" | tail -n 1 | sed 's/^pg_server.sh: //')); PostgreSQL tests will be skipped"
    rm -f "$log"
    stop_pg
}

ensure_venv
ensure_host_venv
export TROVE_E2E_PYTHON="${TROVE_E2E_PYTHON:-$HOST_VENV/bin/python}"

args=("$@")
has_path=0
for arg in "${args[@]+"${args[@]}"}"; do
    case "$arg" in -*) ;; *) if [ -e "$arg" ] || [ -e "$ROOT/${arg%%::*}" ] || [ -e "${arg%%::*}" ]; then has_path=1; fi ;; esac
done
cd "$ROOT"
if [ "$has_path" = 1 ]; then
    start_pg
    set +e  # pytest's own exit status is the script's, 5 ("no tests collected") included
    "$VENV/bin/python" -m pytest "${args[@]}"
    exit $?
fi
if [ "${TROVE_SKIP_LINT:-0}" = 1 ]; then
    say "lint skipped (TROVE_SKIP_LINT=1)"
else
    say "lint (ruff check ., mypy, lint-imports) ..."
    lint_started=$(date +%s%N)
    TROVE_VENV="$VENV" bash "$ROOT/scripts/lint.sh" || {
        say "lint failed; fix the findings above (TROVE_SKIP_LINT=1 skips)"; exit 1; }
    say "lint passed in $(( ($(date +%s%N) - lint_started) / 1000000 ))ms"
fi
start_pg
set +e
"$VENV/bin/python" -m pytest tests/ "${args[@]+"${args[@]}"}"
exit $?
