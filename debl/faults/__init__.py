"""Fault campaigns (docs/RELIABILITY.md): DeBL's commands killed at random moments and its
services stopped mid-phase, then recovered as the docs tell a user and checked against the
in-memory reference. ``campaign`` runs them, ``checks`` compares, ``procs`` handles processes;
``scripts/faults.py`` is the command line."""
