"""Measuring requests: histograms of durations that merge exactly, and where one request's time
went. docs/ARCHITECTURE.md, "Where each role lives"."""
