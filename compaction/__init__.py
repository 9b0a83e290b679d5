"""When and how history is folded: pure plans (policy), the summarizer's ladder and the compactor that applies them."""
