#!/usr/bin/env bash
# The test command. Builds (or reuses) a virtualenv at .venv in this checkout with
# hermes-trove installed editable plus its test extras and hermes-agent==0.19.0 (the real
# host the end-to-end suite runs), then runs pytest over tests/ with that interpreter.
# A whole-suite run lints first (scripts/lint.sh: ruff and mypy) and stops on any finding.
#
#   scripts/test.sh                       # lint, then everything, end-to-end suite included
#   scripts/test.sh -m "not e2e"          # lint, then unit tests only
#   scripts/test.sh tests/test_store.py   # named paths replace tests/; no lint
#
# Environment: PYTHON (interpreter used to create the venv, default python3.11 or python3),
# TROVE_VENV (venv path, default .venv), TROVE_SKIP_INSTALL=1 (use the venv as it is),
# TROVE_SKIP_LINT=1 (skip the lint step).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TROVE_VENV:-$ROOT/.venv}"
HOST_PIN="hermes-agent==0.19.0"

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

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        local base; base="$(pick_python)"
        if ! "$base" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)'; then
            say "$base is $("$base" -V 2>&1); hermes-agent 0.19.0 needs Python >=3.11,<3.14 (set PYTHON=...)"
            exit 2
        fi
        say "creating $VENV with $("$base" -V 2>&1)"
        "$base" -m venv "$VENV"
    fi
    local stamp="$VENV/.trove-test-deps" want
    want="$(deps_fingerprint)"
    if [ "${TROVE_SKIP_INSTALL:-0}" = 1 ] || { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
        return
    fi
    say "installing hermes-trove (editable, [test,regex,embeddings]) and $HOST_PIN into $VENV"
    local pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,regex,embeddings]" "$HOST_PIN")
    "${pip[@]}" || { say "pip install failed; retrying once in 10s"; sleep 10; "${pip[@]}"; }
    # The checkout root is the package: prove the editable mapping works from elsewhere.
    (cd / && "$VENV/bin/python" -c 'import hermes_trove, sys; sys.exit(0 if hasattr(hermes_trove, "register") else 1)') || {
        say "import hermes_trove failed in $VENV after the editable install"; exit 2; }
    echo "$want" > "$stamp"
}

ensure_venv

args=("$@")
has_path=0
for arg in "${args[@]+"${args[@]}"}"; do
    case "$arg" in -*) ;; *) if [ -e "$arg" ] || [ -e "$ROOT/${arg%%::*}" ] || [ -e "${arg%%::*}" ]; then has_path=1; fi ;; esac
done
cd "$ROOT"
if [ "$has_path" = 1 ]; then
    exec "$VENV/bin/python" -m pytest "${args[@]}"
fi
if [ "${TROVE_SKIP_LINT:-0}" = 1 ]; then
    say "lint skipped (TROVE_SKIP_LINT=1)"
else
    say "lint (ruff check ., mypy) ..."
    lint_started=$(date +%s%N)
    TROVE_VENV="$VENV" bash "$ROOT/scripts/lint.sh" || {
        say "lint failed; fix the findings above (TROVE_SKIP_LINT=1 skips)"; exit 1; }
    say "lint passed in $(( ($(date +%s%N) - lint_started) / 1000000 ))ms"
fi
exec "$VENV/bin/python" -m pytest tests/ "${args[@]+"${args[@]}"}"
