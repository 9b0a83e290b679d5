"""Runtime: the shared objects one plugin load builds once (config, database, store, DAG).

Engine copies, tools, hooks and commands all reach storage through one ``Runtime``; it
holds no live handle (``Database`` is a path), so deep copies share it unchanged.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import TroveConfig, database_path, load_config, payload_dir
from .dag import SummaryDAG
from .db import Database
from .filters import SessionFilters
from .payloads.guard import storage_transform
from .scope import Visibility
from .store import MessageStore, SessionKey


@dataclass
class Runtime:
    config: TroveConfig
    db: Database
    store: MessageStore
    dag: SummaryDAG
    filters: SessionFilters
    llm: Any = None  # ctx.llm captured at register(); optional
    plugin_path: str = str(Path(__file__).resolve().parent)
    counters: dict[str, int] = field(default_factory=dict)
    # session id -> mode ("active", "ignored", "stateless") for sessions a trove engine serves here
    bound_sessions: dict[str, str] = field(default_factory=dict)

    # the engine is typed loosely here: naming it would make runtime and engine import each other
    _foreground: weakref.ref[Any] | None = field(default=None, repr=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> Runtime:
        return self

    def set_foreground(self, engine: Any) -> None:
        """Remember the engine copy that bound a session most recently (for /trove commands)."""
        self._foreground = weakref.ref(engine)

    def foreground_engine(self) -> Any:
        """The most recently bound engine copy still alive, or None before any session binds."""
        return self._foreground() if self._foreground is not None else None

    @property
    def payload_dir(self) -> Path:
        return payload_dir(self.config)

    def bump(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def visibility(self, key: SessionKey | None) -> Visibility:
        """What a caller bound to ``key`` may read across sessions (TROVE_MEMORY_SCOPE; no key = local)."""
        mode = self.config.memory_scope
        if mode == "profile":
            return Visibility()
        sid = key.session_id if key is not None else ""
        row = self.store.session(sid) if sid else None
        scope = row.scope if row is not None and row.scope else key.effective_scope if key is not None else "local"
        return Visibility(mode, scope, sid)

    def skip_message(self, message: dict[str, Any]) -> bool:
        """The ingest skip callback of every path (engine, hook): a filtered message is counted."""
        if self.filters.skip_message(message):
            self.bump("ignored_message_count")
            return True
        return False


def build_runtime(config: TroveConfig | None = None, llm: Any = None) -> Runtime:
    """Build the runtime from a config (default: the environment)."""
    config = config if config is not None else load_config()
    db = Database(database_path(config))
    store = MessageStore(db, transform=storage_transform(config))
    return Runtime(config=config, db=db, store=store, dag=SummaryDAG(db),
                   filters=SessionFilters.from_config(config), llm=llm)
