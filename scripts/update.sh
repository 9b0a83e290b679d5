#!/usr/bin/env bash
# Update an installed hermes-trove: fast-forward the checkout the plugin link points to
# (or, without a link, this checkout) with `git pull --ff-only`, then re-run that
# checkout's install preflight so the plugin and skill links are checked again.
# Uses the same HERMES_HOME / HERMES_PROFILE rules as scripts/install.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
die() { printf 'update.sh: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) sed -n '2,5p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) die "unknown argument '$1' (see --help)" ;;
esac

. "$(dirname "${BASH_SOURCE[0]}")/_target_home.sh"
PLUGIN_DST="$TARGET_HOME/plugins/hermes-trove"

if [ -L "$PLUGIN_DST" ]; then
    CHECKOUT="$(cd "$PLUGIN_DST" 2>/dev/null && pwd -P)" || die "$PLUGIN_DST is a broken link ($(readlink "$PLUGIN_DST"))"
elif [ -d "$PLUGIN_DST/.git" ]; then
    CHECKOUT="$(cd "$PLUGIN_DST" && pwd -P)"
else
    CHECKOUT="$HERE"
fi
git -C "$CHECKOUT" rev-parse --git-dir >/dev/null 2>&1 || die "$CHECKOUT is not a git checkout"

before="$(git -C "$CHECKOUT" rev-parse --short HEAD)"
echo "updating $CHECKOUT (at $before)"
git -C "$CHECKOUT" pull --ff-only || die "git pull --ff-only failed in $CHECKOUT; resolve it there and run this again"
after="$(git -C "$CHECKOUT" rev-parse --short HEAD)"
[ "$before" = "$after" ] && echo "already up to date ($after)" || echo "updated $before -> $after"

bash "$CHECKOUT/scripts/install.sh"
echo
echo "Restart Hermes to load the updated plugin."
