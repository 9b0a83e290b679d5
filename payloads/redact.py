"""Named sensitive-pattern redaction, applied before anything reaches storage.

``Redactor.from_config(config)`` compiles the configured catalog entries once;
``redact(text)`` replaces matched secret values with metadata-only placeholders. It is
deliberately lossy for the matched values and forward-only: it never rewrites rows that
were stored before it was enabled. ``describe()`` reports the setup without any secret;
``describe_config(config)`` is that report for status and doctor, never raising.
"""
from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import TroveConfig

DIGEST_CHARS = 8
PLACEHOLDER_FORMAT = "[REDACTED:<pattern>:sha256=<8 hex digits>]; password_assignment uses [REDACTED:password]"

# Quote closing a JSON key: plain, or backslash-escaped when JSON sits inside a string.
_Q = r"(?:\\?[\"'])"
# Values: a quoted string (spaces allowed), an escaped-quoted string, or a bare token.
_VALUE = (r"(?:\\\"(?P<ev>(?:(?!\\\").){1,4096}?)\\\""
          r"|\"(?P<dv>(?:[^\"\\\n]|\\.){1,4096})\""
          r"|'(?P<sv>[^'\n]{1,4096})'"
          r"|(?P<bv>[^\s\"',;&}\])]{1,4096}))")


def _assignment(keys: str) -> re.Pattern[str]:
    # The match starts at the key name (prefixes such as OPENAI_ or x- stay outside it), which
    # lets the regex engine skip quickly to candidate positions on long text.
    return re.compile(rf"(?P<head>(?<![A-Za-z0-9])(?:{keys}){_Q}?\s*(?:=>|:=|[:=])\s*)" + _VALUE, re.IGNORECASE)


_API_KEY = _assignment(r"api[_-]?key|api[_-]?token|access[_-]?token|secret[_-]?key|client[_-]?secret")
_PASSWORD = _assignment(r"password|passwd|passphrase|pwd")
# Token-like JSON keys ("token", "id_token", "refresh_token", "authorization", ...); the match
# starts at the word and _json_key_before checks the opening quote and any prefix.
_TOKEN_KEY = re.compile(r"(?P<head>(?:token|authorization|bearer)\\?\"\s*:\s*)" + _VALUE, re.IGNORECASE)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<bv>[A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE)
_PEM = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*?)PRIVATE KEY-----"
    r"(?:.*?-----END (?P=label)PRIVATE KEY-----"
    r"|[A-Za-z0-9+/=:,\-\s\\n]*)",  # a block cut off before its END line is still redacted
    re.DOTALL)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # keeps every index


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]


def _placeholder(name: str, value: str) -> str:
    if name == "password_assignment":
        return "[REDACTED:password]"
    return f"[REDACTED:{name}:sha256={_digest(value)}]"


def _looks_like_token(value: str) -> bool:
    # "Bearer authentication" is prose; real tokens carry digits or token punctuation.
    return any(ch.isdigit() or ch in "-._~+/=" for ch in value)


def _json_key_before(text: str, pos: int) -> bool:
    i = pos
    while i > 0 and pos - i < 64 and text[i - 1] in _KEY_CHARS:
        i -= 1
    return i > 0 and text[i - 1] == '"'


_NOT_SECRETS = frozenset({"null", "none", "nil", "true", "false", "undefined"})


def _value_sub(name: str, bearer: bool = False) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        groups = m.groupdict()
        for group, (left, right) in (("ev", ('\\"', '\\"')), ("dv", ('"', '"')),
                                     ("sv", ("'", "'")), ("bv", ("", ""))):
            value = groups.get(group)
            if value is None:
                continue
            if value.startswith("[REDACTED:") or (bearer and not _looks_like_token(value)):
                return m.group(0)
            if group == "bv" and value.lower() in _NOT_SECRETS:
                return m.group(0)
            if group == "bv" and not bearer and _json_key_before(m.string, m.start()):
                left = right = '"'  # a bare JSON value (number) becomes a string: the JSON stays valid
            return f"{m.group('head')}{left}{_placeholder(name, value)}{right}"
        return m.group(0)
    return sub


def _pem_sub(m: re.Match[str]) -> str:
    return _placeholder("private_key", m.group(0))


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


CATALOG: dict[str, tuple[_Rule, ...]] = {
    "private_key": (_Rule(_PEM, ("-----begin ",), _pem_sub),),
    "api_key": (_Rule(_API_KEY, ("api", "access", "secret", "client"), _value_sub("api_key")),),
    "bearer_token": (_Rule(_BEARER, ("bearer",), _value_sub("bearer_token", bearer=True)),
                     _Rule(_TOKEN_KEY, ("token", "authorization", "bearer"), _value_sub("bearer_token"),
                           accept=_json_key_before)),
    "password_assignment": (_Rule(_PASSWORD, ("pass", "pwd"), _value_sub("password_assignment")),),
}
# Order matters: whole PEM blocks first, then specific key names before generic token keys.
_ORDER = ("private_key", "api_key", "bearer_token", "password_assignment")


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
                   patterns=tuple(n for n in _ORDER if n in names),
                   unknown_patterns=tuple(n for n in names if n not in CATALOG),
                   source="env" if "env" in src else "default")

    def redact(self, text: str) -> str:
        """``text`` with every configured secret value replaced by its placeholder."""
        if not self.enabled or not self.patterns or not isinstance(text, str) or not text:
            return text
        low = text.translate(_ASCII_LOWER)
        for name in self.patterns:
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
