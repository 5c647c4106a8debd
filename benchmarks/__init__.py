"""Performance benchmarks of toolfactory (run with ``make bench``; see README.md)."""
