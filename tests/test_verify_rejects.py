"""``debl verify`` counts a source file's rejected lines whatever the file's name: a
file named ``#...`` once had its reject records skipped as comments, and verify reported lines
lost that were not. On the real stack: a hot-only load (MySQL alone, no Spark) of such files."""

from __future__ import annotations

import pytest

from loaders.load import LoadOptions, run_load
from loaders.verify import verify_load

GOOD = b"1\t123456789\t2\t1\tdata\t1700000000\t1\n"


@pytest.mark.stack
def test_verify_counts_the_rejects_of_a_file_named_like_a_comment(stack_config, tmp_path):
    (tmp_path / "#hash.tsv").write_bytes(GOOD + b"not a link\n" + b"-1\t1\t1\t1\tx\t1\t1\n")
    (tmp_path / "# file").write_bytes(GOOD.replace(b"\t2\t", b"\t3\t") + b"bad\n")
    summary = run_load(stack_config, str(tmp_path), LoadOptions(hot_bytes=1 << 30))
    assert (summary.hot_rows, summary.rejects) == (2, 3)
    report = verify_load(stack_config, summary.load_id)
    assert report.ok, report.failures
    assert {c.what: c.found for c in report.checks if c.what.startswith("file ")} == {
        "file #hash.tsv: lines = loaded + rejected": 3,
        "file # file: lines = loaded + rejected": 2}
