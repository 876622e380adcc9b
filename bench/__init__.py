"""Benchmarks (not shipped with the application): see README.md, "Benchmarks"."""
