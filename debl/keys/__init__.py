"""Which keys are where: a source file's manifest (its format, its pieces, the check of its
claims) and making one from a file's bytes, key sets and the answerable rule, and the hot keys'
filter. docs/ARCHITECTURE.md, "Where each role lives"."""
