"""Natural time without a model: tool periods (periods.py) and occurrence time in message text (occurrence.py)."""
