"""The package version, alone in a module so the build reads it without importing the package."""

__version__ = "2.0.0.dev0"
