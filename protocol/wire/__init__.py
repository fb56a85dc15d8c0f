"""The wire: every message that crosses a process boundary, and how it is encoded."""
