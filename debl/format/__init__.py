"""The formats DeBL reads and writes: the link and its line (its parser, the merge rule,
checksums), blocks of lines checked at C speed, the bucket map (id1 -> bucket -> range) and the
bucket files (sorted rows with an index footer). docs/ARCHITECTURE.md, "Where each role lives"."""
