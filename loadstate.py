"""What ``register()`` did in this process: ``registered`` (it completed) and ``failure`` (the
loader's description of what broke). A leaf module, so the operators' reports read it without
importing the loader (``__init__``), which would close an import cycle through the command."""
from __future__ import annotations

from typing import Any

LOAD_STATE: dict[str, Any] = {"registered": False, "failure": None}
