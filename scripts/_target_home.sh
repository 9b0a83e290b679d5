# Sourced by install.sh and update.sh: sets TARGET_HOME from HERMES_PROFILE / HERMES_HOME.
# ~/.hermes/profiles/<name> for a profile, else $HERMES_HOME, else ~/.hermes. Needs die().
if [ -n "${HERMES_PROFILE:-}" ]; then
    case "$HERMES_PROFILE" in
        *[!A-Za-z0-9._-]*|.|..|-*) die "invalid HERMES_PROFILE '$HERMES_PROFILE' (letters, digits, '.', '_', '-')" ;;
    esac
    [ -n "${HOME:-}" ] || die "HOME is not set"
    TARGET_HOME="$HOME/.hermes/profiles/$HERMES_PROFILE"
else
    TARGET_HOME="${HERMES_HOME:-${HOME:?HOME is not set}/.hermes}"
fi
