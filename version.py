"""The package version, in a leaf module so reports can read it without the package root."""

__version__ = "0.1.0"
