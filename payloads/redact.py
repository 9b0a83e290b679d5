"""Named sensitive-pattern redaction, applied before anything reaches storage.

``Redactor.from_config(config)`` compiles the configured catalog entries once;
``redact(text)`` replaces matched secret values with metadata-only placeholders. It is
deliberately lossy for the matched values and forward-only: it never rewrites rows that
were stored before it was enabled. ``describe()`` reports the setup without any secret;
``describe_config(config)`` is that report for status and doctor, never raising.
"""
from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..refs import content_sha256

if TYPE_CHECKING:
    from ..config import TroveConfig

DIGEST_CHARS = 8
PLACEHOLDER_FORMAT = "[REDACTED:<pattern>:sha256=<8 hex digits>]; password_assignment uses [REDACTED:password]"

# Quote closing a JSON key: plain, or backslash-escaped when JSON sits inside a string.
_Q = r"(?:\\?[\"'])"
# Values: a quoted string (spaces allowed), an escaped-quoted string, or a bare token.
_QUOTED = (r"(?:\\\"(?P<ev>(?:(?!\\\").){1,4096}?)\\\""
           r"|\"(?P<dv>(?:[^\"\\\n]|\\.){1,4096})\""
           r"|'(?P<sv>[^'\n]{1,4096})'")
_VALUE = _QUOTED + r"|(?P<bv>[^\s\"',;&}\])]{1,4096}))"
# password=a;b&c: the whole value, including what follows ; and & (lossy on purpose).
_PASSWORD_VALUE = _QUOTED + r"|(?P<bv>[^\s\"',}\])]{1,4096}))"


def _assignment(keys: str, value: str = _VALUE) -> re.Pattern[str]:
    # The match starts at the key name (prefixes such as OPENAI_ or x- stay outside it), which
    # lets the regex engine skip quickly to candidate positions on long text.
    return re.compile(rf"(?P<head>(?<![A-Za-z0-9])(?:{keys}){_Q}?\s*(?:=>|:=|[:=])\s*)" + value, re.IGNORECASE)


_API_KEY = _assignment(r"api[_-]?key|api[_-]?token|access[_-]?token|secret[_-]?key|client[_-]?secret"
                       r"|secret[_-]?access[_-]?key")
_PASSWORD = _assignment(r"password|passwd|passphrase|pwd", _PASSWORD_VALUE)
# Token-like JSON keys ("token", "id_token", "refresh_token", "authorization", ...); the match
# starts at the word and _json_key_before checks the opening quote and any prefix.
_TOKEN_KEY = re.compile(r"(?P<head>(?:token|authorization|bearer)\\?\"\s*:\s*)" + _VALUE, re.IGNORECASE)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<bv>[A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE)
_PEM = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*?)PRIVATE KEY-----"
    r"(?:.*?-----END (?P=label)PRIVATE KEY-----"
    r"|[A-Za-z0-9+/=:,\-\s\\n]*)",  # a block cut off before its END line is still redacted
    re.DOTALL)
# Credentials recognised by their own shape, wherever they appear (prose, logs, code).
_PROVIDER = re.compile(
    r"(?P<bv>sk-(?:proj-|ant-|or-|live-|test-)?[A-Za-z0-9_\-]{20,512}"      # OpenAI, Anthropic, OpenRouter
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,256}"                        # Stripe secret / restricted
    r"|xox[abposre]-[A-Za-z0-9\-]{10,256}"                                # Slack
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,256}|github_pat_[A-Za-z0-9_]{22,256}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,256}"                                      # GitLab
    r"|AIza[0-9A-Za-z_\-]{35}"                                            # Google API keys
    r"|hf_[A-Za-z0-9]{30,256}|npm_[A-Za-z0-9]{36,256}|pypi-[A-Za-z0-9_\-]{50,512}"
    r"|SG\.[A-Za-z0-9_\-]{16,64}\.[A-Za-z0-9_\-]{16,128})"                # SendGrid
    r"(?![A-Za-z0-9_\-])")
_PROVIDER_ANCHORS = ("sk-", "sk_", "rk_", "xox", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
                     "aiza", "hf_", "npm_", "pypi-", "sg.")
_AWS_ID = re.compile(r"(?P<bv>(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16})(?![0-9A-Za-z])")
_JWT = re.compile(r"(?P<bv>eyJ[A-Za-z0-9_\-]{8,4096}\.eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{8,4096})")
# scheme://user:password@host: the password goes, the user and host stay.
_URL_CREDENTIALS = re.compile(r"(?P<head>://[^\s:/@\\\"'<>]{0,256}:)(?P<bv>[^\s@/\\\"'<>]{1,1024})(?=@)")
# Generic ``NAME_TOKEN=value`` / ``token: value``: a key ending in token/secret/key/..., then a
# value that looks like a credential (checked in _secretish, keeping code and prose intact).
_GENERIC = re.compile(
    r"(?P<head>(?:token|secret|key|credentials?|passphrase)(?:\\?[\"'])?\s*(?:=>|:=|[:=])[ \t]*)" + _VALUE,
    re.IGNORECASE)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # keeps every index


def _placeholder(name: str, value: str) -> str:
    if name == "password_assignment":
        return "[REDACTED:password]"
    return f"[REDACTED:{name}:sha256={content_sha256(value)[:DIGEST_CHARS]}]"


def _looks_like_token(value: str) -> bool:
    # "Bearer authentication" is prose; real tokens carry digits or token punctuation.
    return any(ch.isdigit() or ch in "-._~+/=" for ch in value)


def _json_key_before(text: str, pos: int) -> bool:
    i = pos
    while i > 0 and pos - i < 64 and text[i - 1] in _KEY_CHARS:
        i -= 1
    return i > 0 and text[i - 1] == '"'


_NOT_SECRETS = frozenset({"null", "none", "nil", "true", "false", "undefined"})


_CODE_REF = re.compile(r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(?")


def _code_reference(value: str, head: str) -> bool:
    """A bare value that is code, not a secret: ``config.api_key``, ``getpass(`` or the key's own name."""
    if _CODE_REF.fullmatch(value) is None:
        return False
    return "." in value or value.endswith("(") or value.lower() in head.lower()


def _value_sub(name: str, bearer: bool = False) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        groups = m.groupdict()
        for group, (left, right) in (("ev", ('\\"', '\\"')), ("dv", ('"', '"')),
                                     ("sv", ("'", "'")), ("bv", ("", ""))):
            value = groups.get(group)
            if value is None:
                continue
            if value.startswith("[REDACTED:") or (bearer and not _looks_like_token(value)) or (
                    group == "bv" and (value.lower() in _NOT_SECRETS or _code_reference(value, m.group("head")))):
                return m.group(0)
            if group == "bv" and not bearer and _json_key_before(m.string, m.start()):
                left = right = '"'  # a bare JSON value (number) becomes a string: the JSON stays valid
            return f"{m.group('head')}{left}{_placeholder(name, value)}{right}"
        return m.group(0)
    return sub


@dataclass(frozen=True)
class _Rule:
    """One regex tried only where one of its lowercase ``anchors`` occurs (fast on long text)."""

    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    repl: Callable[[re.Match[str]], str]
    accept: Callable[[str, int], bool] | None = None

    def apply(self, text: str, low: str) -> str:
        starts: set[int] = set()
        for anchor in self.anchors:
            i = low.find(anchor)
            while i != -1:
                starts.add(i)
                i = low.find(anchor, i + 1)
        out: list[str] = []
        last = 0
        for pos in sorted(starts):
            if pos < last or (self.accept is not None and not self.accept(text, pos)):
                continue
            m = self.pattern.match(text, pos)
            if m is None:
                continue
            out += [text[last:pos], self.repl(m)]
            last = m.end()
        return "".join(out) + text[last:] if out else text


_NOT_CODE_STARTS = ("$", "{", "%", "<", "[redacted", "os.", "env.", "process.env", "self.", "this.", "config.",
                    "settings.", "none", "null", "undefined", "true", "false")


def _secretish(value: str) -> bool:
    """Whether a value after a generic ``*_TOKEN``/``*_KEY`` name looks like a credential.

    Code (``self.token``, ``get_key()``, ``${VAR}``) and short words stay; what remains is
    long enough and carries a digit or mixed-case noise, as generated credentials do.
    """
    v = value.strip()
    low = v.lower()
    if len(v) < 8 or low.startswith(_NOT_CODE_STARTS) or any(ch in v for ch in "()[]{} "):
        return False
    if any(ch.isdigit() for ch in v):
        return True
    return len(v) >= 16 and any(ch.isupper() for ch in v) and any(ch.islower() for ch in v)


def _boundary(text: str, pos: int) -> bool:
    """A shape-matched credential starts a word (not inside a longer identifier)."""
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_-")


def _key_boundary(text: str, pos: int) -> bool:
    """A generic key word starts a name or ends one (``GITHUB_TOKEN``); bare ``key`` needs a prefix."""
    prev = text[pos - 1] if pos else ""
    if prev and prev.isalnum():
        return False
    opened = text.rfind("[REDACTED:", max(0, pos - 40), pos)
    if opened != -1 and "]" not in text[opened:pos]:
        return False  # the pattern name inside a placeholder (``[REDACTED:api_key:sha256=...]``)
    return text[pos:pos + 3].lower() != "key" or prev in ("_", "-", ".")


def _shape_sub(name: str, check: Callable[[str], bool] | None = None) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        value = m.group("bv")
        if value.startswith("[REDACTED:") or (check is not None and not check(value)):
            return m.group(0)
        head = m.groupdict().get("head") or ""
        return f"{head}{_placeholder(name, value)}"
    return sub


def _generic_sub(m: re.Match[str]) -> str:
    groups = m.groupdict()
    value = next((groups[g] for g in ("ev", "dv", "sv", "bv") if groups.get(g) is not None), "")
    if not _secretish(value):
        return m.group(0)
    return _value_sub("generic_secret")(m)


# Order matters, it is the order rules apply in: whole PEM blocks first, then URL credentials
# and specific key names, then credentials known by their shape, the generic names last.
CATALOG: dict[str, tuple[_Rule, ...]] = {
    "private_key": (_Rule(_PEM, ("-----begin ",), lambda m: _placeholder("private_key", m.group(0))),),
    "url_credentials": (_Rule(_URL_CREDENTIALS, ("://",), _shape_sub("url_credentials")),),
    "api_key": (_Rule(_API_KEY, ("api", "access", "secret", "client"), _value_sub("api_key")),),
    "bearer_token": (_Rule(_BEARER, ("bearer",), _value_sub("bearer_token", bearer=True)),
                     _Rule(_TOKEN_KEY, ("token", "authorization", "bearer"), _value_sub("bearer_token"),
                           accept=_json_key_before)),
    "password_assignment": (_Rule(_PASSWORD, ("pass", "pwd"), _value_sub("password_assignment")),),
    "jwt": (_Rule(_JWT, ("eyj",), _shape_sub("jwt"), accept=_boundary),),
    "provider_key": (_Rule(_PROVIDER, _PROVIDER_ANCHORS,
                           _shape_sub("provider_key", lambda v: any(c.isdigit() for c in v)), accept=_boundary),),
    "cloud_key": (_Rule(_AWS_ID, ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa"),
                        _shape_sub("cloud_key"), accept=_boundary),),
    "generic_secret": (_Rule(_GENERIC, ("token", "secret", "key", "credential", "passphrase"), _generic_sub,
                             accept=_key_boundary),),
}
# The original four names also switch on the formats people paste alongside them, so the
# default TROVE_SENSITIVE_PATTERNS covers them without a configuration change.
IMPLIES: dict[str, tuple[str, ...]] = {
    "api_key": ("provider_key", "cloud_key", "generic_secret"),
    "bearer_token": ("jwt",),
    "password_assignment": ("url_credentials",),
}


def rule_names(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """The catalog entries ``patterns`` switch on (with what they imply), in application order."""
    on = set(patterns).union(*(IMPLIES.get(name, ()) for name in patterns))
    return tuple(n for n in CATALOG if n in on)


@dataclass(frozen=True)
class Redactor:
    """The configured redaction catalog; ``enabled=False`` makes ``redact`` the identity."""

    enabled: bool
    patterns: tuple[str, ...]
    unknown_patterns: tuple[str, ...] = ()
    source: str = "default"

    @classmethod
    def from_config(cls, config: TroveConfig) -> Redactor:
        names = tuple(dict.fromkeys(str(n).strip().lower() for n in config.sensitive_patterns if str(n).strip()))
        sources = dict(getattr(config, "sources", ()) or ())
        src = {sources.get("sensitive_patterns_enabled", "default"), sources.get("sensitive_patterns", "default")}
        return cls(enabled=bool(config.sensitive_patterns_enabled),
                   patterns=tuple(n for n in CATALOG if n in names),
                   unknown_patterns=tuple(n for n in names if n not in CATALOG),
                   source="env" if "env" in src else "default")

    def redact(self, text: str) -> str:
        """``text`` with every configured secret value replaced by its placeholder."""
        if not self.enabled or not self.patterns or not isinstance(text, str) or not text:
            return text
        low = text.translate(_ASCII_LOWER)
        for name in rule_names(self.patterns):
            for rule in CATALOG[name]:
                new = rule.apply(text, low)
                if new is not text:
                    text, low = new, new.translate(_ASCII_LOWER)
        return text

    def describe(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "patterns": list(self.patterns),
                "unknown_patterns": list(self.unknown_patterns), "source": self.source,
                "placeholder_format": PLACEHOLDER_FORMAT}


def describe_config(config: TroveConfig) -> dict[str, Any]:
    """The redaction setup (names, unknown names, placeholder format) for status and doctor; never a secret."""
    try:
        return Redactor.from_config(config).describe()
    except Exception as exc:  # a broken pattern catalog must not break a report
        return {"error": f"{type(exc).__name__}: {exc}"}
