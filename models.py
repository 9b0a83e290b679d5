"""Models: the completion vocabulary every model-backed family shares.

``Complete`` is the completion callable's type, ``host_complete`` builds one over the host's
auxiliary client (or ``ctx.llm``), and ``clean_output`` strips reasoning blocks from what a
model returned and refuses output that is only reasoning. Summaries, rollups, state
extraction, query expansion and answers all call models through these; none of it knows
what the call is for beyond the host's task name.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("hermes_trove.summarize")  # the name host_complete has always logged under

# A completion function: (messages, model, timeout_s, max_tokens) -> text. Raises on failure.
Complete = Callable[[list[dict[str, Any]], str, float, int], str]

_REASONING = re.compile(r"<(think|thinking|reasoning|thought)>.*?</\1>", re.S | re.I)
_OPEN_REASONING = re.compile(r"<(think|thinking|reasoning|thought)>", re.I)


def clean_output(text: str) -> str | None:
    """Strip closed reasoning blocks; reject output that is only (or unfinished) reasoning.

    Surrogates a streamed reply split apart are joined again; a lone one becomes U+FFFD, so the
    text can be stored and sent as UTF-8."""
    text = utf8_text(_REASONING.sub("", text or "").strip())
    if not text or _OPEN_REASONING.search(text):
        return None
    return text


def utf8_text(text: str) -> str:
    """``text`` with surrogates a model's reply split apart joined again and a lone one as U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_PARSES: dict[str, tuple[tuple[int, int], bool]] = {}  # config.yaml path -> (mtime_ns, size), whether it parses
_LAST_READ: dict[str, Any] = {}  # config.yaml path -> what host_config last read from it in this process


def config_parses(path: Path) -> bool:
    """Whether the config.yaml at ``path`` parses (a missing one does), checked once per version of the file.
    The host's loader, given a file it cannot parse, writes a ``.bak`` copy beside it and prints a warning:
    trove's reads leave that to the host and say it once in the log instead."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    sig, seen = (st.st_mtime_ns, st.st_size), _PARSES.get(str(path))
    if seen is not None and seen[0] == sig:
        return seen[1]
    try:
        import yaml  # type: ignore[import-untyped]  # the host's dependency (PyYAML)

        yaml.safe_load(path.read_text(encoding="utf-8"))
        ok = True
    except ImportError:  # no host here: nothing reads the file
        ok = True
    except Exception as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        log.warning("trove: %s does not parse (%s); trove keeps the settings it last read from it (none if none)"
                    " until it is fixed", path, first)
        ok = False
    _PARSES[str(path)] = (sig, ok)
    return ok


def host_config(home: str = "") -> dict[str, Any] | None:
    """``home``'s config.yaml as Hermes reads it (``${VAR}`` expanded, a managed scope's file merged over
    it); None outside Hermes or when unreadable. ``home`` "" = the host's current one; a ``home`` that is
    no folder reads as None: the host's read would create a Hermes home there. While the file does not parse
    (a user mid-edit) this is what it read last in this process, as the host keeps serving its last read."""
    if home and not os.path.isdir(home):
        return None
    try:
        from hermes_cli.config import load_config_readonly  # type: ignore[import-untyped]
        from hermes_constants import reset_hermes_home_override, set_hermes_home_override

        token = set_hermes_home_override(home) if home else None
        try:
            from hermes_cli.config import get_config_path

            path = str(get_config_path())
            if config_parses(Path(path)):
                config = _LAST_READ[path] = load_config_readonly()
            else:  # the host's read would copy it aside and print, then serve what it last read in the process
                config = _LAST_READ.get(path)
        finally:
            if token is not None:
                reset_hermes_home_override(token)
    except Exception:  # no host, or a file it cannot read
        return None
    return config if isinstance(config, dict) else None


def host_task_window(task: str = "compression", home: str = "") -> int:
    """The window the host's config.yaml gives its auxiliary ``task`` model
    (``auxiliary.<task>.context_length``); 0 when unset, unreadable or outside Hermes. The host
    learns an auxiliary model's window only from this setting or by probing the provider, which a
    compaction does not do. ``home`` is the profile whose config.yaml is read (the runtime's: a
    background pass's thread does not carry the profile a gateway scoped the turn to); "" = the
    host's current one. A ``home`` that is no folder reads as unknown: the host's read would create
    a Hermes home there."""
    try:
        aux = (host_config(home) or {}).get("auxiliary") or {}
        value = (aux.get(task) or {}).get("context_length") if isinstance(aux, dict) else None
        return max(0, int(value or 0)) if not isinstance(value, bool) else 0
    except Exception:  # no host, a damaged file or a value that is no number: unknown
        return 0


def host_complete(runtime_info: Callable[[], dict[str, Any]], plugin_llm: Any = None,
                  task: str = "compression") -> Complete | None:
    """A completion function over the host's auxiliary client (or ``ctx.llm``); None offline."""
    try:
        from agent.auxiliary_client import call_llm, extract_content_or_reasoning
    except ImportError:  # no Hermes host in this process: ctx.llm or no model at all
        log.debug("trove: host auxiliary client not importable")
        call_llm = None
    if call_llm is None and plugin_llm is None:
        return None

    def complete(messages: list[dict[str, Any]], model: str, timeout_s: float, max_tokens: int) -> str:
        if call_llm is not None:
            chosen = {"model": model} if model else {}
            return extract_content_or_reasoning(call_llm(task=task, main_runtime=runtime_info(), messages=messages,
                                                         timeout=timeout_s, max_tokens=max_tokens, **chosen))
        res = plugin_llm.complete(messages, timeout=timeout_s, max_tokens=max_tokens, purpose="trove-summary")
        return str(getattr(res, "text", "") or "")

    return complete
