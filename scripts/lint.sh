#!/usr/bin/env bash
# The lint step: ruff over the whole tree, then mypy over the package, then import-linter's
# contracts (the declared layers and the features' independence), all configured in
# pyproject.toml. Exits non-zero on any finding. The checkout root is the package, so mypy and
# lint-imports read it through a temporary link named hermes_trove.
#
# Environment: TROVE_VENV (venv holding ruff, mypy and import-linter, default .venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${TROVE_VENV:-$ROOT/.venv}/bin/python"
cd "$ROOT"

link_dir="$(mktemp -d)"
trap 'rm -rf "$link_dir"' EXIT
ln -s "$ROOT" "$link_dir/hermes_trove"

rc=0
"$PY" -m ruff check --quiet . || rc=1
# Report paths relative to the checkout, not through a link (mypy's cache may replay an older one).
MYPYPATH="$link_dir" "$PY" -m mypy 2>&1 | sed -E 's#^/[^:]*/hermes_trove/##' || rc=1
# import-linter imports the package by name; its script sits beside the venv's python.
# Prints the contracts and, for a broken one, each offending import chain with its line.
PYTHONPATH="$link_dir" "$(dirname "$PY")/lint-imports" --no-cache --no-logo pyproject.toml || rc=1
exit "$rc"
