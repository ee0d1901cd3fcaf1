"""Benchmark suites, the papers' metrics, and reports (tables, CSV, plots)."""
