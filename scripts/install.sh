#!/usr/bin/env bash
# Install this checkout as the hermes-trove plugin by linking it into a Hermes home:
#   <home>/plugins/hermes-trove  -> this checkout
#   <home>/skills/hermes-trove   -> this checkout's skills/hermes-trove
# <home> is $HERMES_HOME (default ~/.hermes), or with HERMES_PROFILE=<name> the profile where
# Hermes keeps it (~/.hermes/profiles/<name>; <HERMES_HOME>/profiles/<name> when HERMES_HOME is
# outside ~/.hermes). Both targets are checked before anything is created: a target
# that exists and is not already our link is a conflict, and nothing changes. A checkout
# that already lives at the plugin path is left in place; only the skill is linked.
set -euo pipefail

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SKILL_SRC="$CHECKOUT/skills/hermes-trove"

die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) die "unknown argument '$1' (see --help)" ;;
esac

. "$(dirname "${BASH_SOURCE[0]}")/_target_home.sh"
PLUGIN_DST="$TARGET_HOME/plugins/hermes-trove"
SKILL_DST="$TARGET_HOME/skills/hermes-trove"

[ -f "$CHECKOUT/plugin.yaml" ] && [ -f "$CHECKOUT/__init__.py" ] \
    || die "$CHECKOUT does not look like a hermes-trove checkout (plugin.yaml and __init__.py missing)"
[ -d "$SKILL_SRC" ] || die "bundled skill directory $SKILL_SRC is missing"

real_dir() { (cd "$1" 2>/dev/null && pwd -P); }

# plan_target DST SRC -> prints "link", "keep" or "inplace"; dies on a conflict.
plan_target() {
    local dst="$1" src="$2"
    if [ -L "$dst" ]; then
        if [ "$(real_dir "$dst" || true)" = "$src" ]; then echo keep; return; fi
        die "$dst is a link to '$(readlink "$dst")', not to $src; remove it or point it here first (nothing was changed)"
    fi
    if [ -e "$dst" ]; then
        if [ -d "$dst" ] && [ "$(real_dir "$dst")" = "$src" ]; then echo inplace; return; fi
        die "$dst already exists and is not a link to $src; move it aside first (nothing was changed)"
    fi
    echo link
}

# Preflight both targets before touching anything.
plugin_plan="$(plan_target "$PLUGIN_DST" "$CHECKOUT")"
skill_plan="$(plan_target "$SKILL_DST" "$SKILL_SRC")"
[ "$skill_plan" != inplace ] || die "$SKILL_DST is the bundled skill directory itself; expected a link (nothing was changed)"

apply() {
    local plan="$1" dst="$2" src="$3"
    case "$plan" in
        link) mkdir -p "$(dirname "$dst")" && ln -s "$src" "$dst" && echo "linked  $dst -> $src" ;;
        keep) echo "ok      $dst -> $src (already linked)" ;;
        inplace) echo "ok      $dst is this checkout (left in place)" ;;
    esac
}
apply "$plugin_plan" "$PLUGIN_DST" "$CHECKOUT"
apply "$skill_plan" "$SKILL_DST" "$SKILL_SRC"
[ -f "$SKILL_SRC/SKILL.md" ] || echo "note: $SKILL_SRC has no SKILL.md yet; the skill will not be listed" >&2

PROFILE_FLAG=""
[ -n "${HERMES_PROFILE:-}" ] && PROFILE_FLAG=" -p $HERMES_PROFILE"
cat <<MSG

Enable it with the host's commands (they edit $TARGET_HOME/config.yaml):
  hermes$PROFILE_FLAG plugins enable hermes-trove --no-allow-tool-override
  hermes$PROFILE_FLAG config set context.engine trove
(trove replaces no built-in tool, so it is enabled without that grant and without the question.)
Then restart Hermes. After the first conversation (there is no database before it), check it with: hermes$PROFILE_FLAG trove doctor
MSG
