"""The library version, recorded in every adapter manifest and result row."""

__version__ = "0.1.0"
