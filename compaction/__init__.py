"""When and how history is folded: pure plans (policy), the summarizer's ladder, the summary
message (assembly) and the compactor that applies them."""

# The public face: the modules the host edge and bench/ use.
__all__ = ["assembly", "compactor", "policy", "summarize"]
