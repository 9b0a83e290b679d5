# Sourced by install.sh and update.sh: sets TARGET_HOME from HERMES_PROFILE / HERMES_HOME.
# A profile lives where Hermes keeps profiles: ~/.hermes/profiles/<name>, or, when HERMES_HOME
# points outside ~/.hermes, <HERMES_HOME>/profiles/<name> (and when that HERMES_HOME is itself
# <root>/profiles/<other>, <root>/profiles/<name>). Without a profile: $HERMES_HOME, else
# ~/.hermes. Needs die().
if [ -n "${HERMES_PROFILE:-}" ]; then
    case "$HERMES_PROFILE" in
        *[!A-Za-z0-9._-]*|.|..|-*) die "invalid HERMES_PROFILE '$HERMES_PROFILE' (letters, digits, '.', '_', '-')" ;;
    esac
    [ -n "${HOME:-}" ] || die "HOME is not set"
    profiles_root="$HOME/.hermes"
    if [ -n "${HERMES_HOME:-}" ]; then
        env_home="$(cd "$HERMES_HOME" 2>/dev/null && pwd -P)" || env_home="${HERMES_HOME%/}"
        native_home="$(cd "$HOME/.hermes" 2>/dev/null && pwd -P)" || native_home="$HOME/.hermes"
        case "$env_home/" in
            "$native_home"/*) ;;
            *) if [ "$(basename "$(dirname "$env_home")")" = profiles ]; then
                   profiles_root="$(dirname "$(dirname "$env_home")")"
               else
                   profiles_root="$env_home"
               fi ;;
        esac
    fi
    TARGET_HOME="$profiles_root/profiles/$HERMES_PROFILE"
else
    TARGET_HOME="${HERMES_HOME:-${HOME:?HOME is not set}/.hermes}"
fi
