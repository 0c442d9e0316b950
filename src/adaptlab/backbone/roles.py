"""The roles of the linear layers inside a block, by name: what method configs may target
(kept apart from the parts themselves, so that configs are read without torch)."""

ROLES: tuple[str, ...] = ("query", "key", "value", "attention_out", "ffn_in", "ffn_out")
"""Linear-layer roles a method may target inside each block."""
