"""Fault campaigns (docs/RELIABILITY.md): DeBL's commands killed at random moments and its
services stopped mid-phase, then recovered as the docs tell a user and checked against the
in-memory reference. One module per role: ``campaign`` (the namespace, input and dataset every
target shares, and the checks after a recovery), ``kills`` (the kill targets, ``KILLS``),
``outages`` (the service outages, ``OUTAGES``), ``kill_points`` (where a killed command stood),
``trial`` (what a trial records), ``runner`` (``run_campaign``), ``table`` (the results table),
``checks`` (stores and answers against the reference), ``procs`` (processes), ``soak`` (the
long query run); ``scripts/faults.py`` and ``scripts/soak.py`` are the command lines."""
