"""Shared message builders for tests (import as ``from helpers import ...``)."""
from conftest import assistant, tool_call, tool_result, user  # noqa: F401
