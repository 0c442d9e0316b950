"""adaptlab."""
