"""Spark: DeBL's session factory (``debl.spark.session``) and the reaper that ends a driver's
JVM with its Python process (``debl.spark.jvm_reaper``). docs/ARCHITECTURE.md, "Where each role
lives"."""
