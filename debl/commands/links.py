"""``debl links``: one read (get_link_list, count_link or multiget_link) through the
coordinator, as a user would ask it."""

from __future__ import annotations

import json

import click

from debl.commands.common import config_of, friendly_errors
from debl.format.link import DEFAULT_LIMIT, MAX_COUNT, MAX_ID, MAX_TIME


def show_data(data: bytes) -> str:
    """Data bytes for a terminal: printable ASCII as is, backslash doubled, anything else as
    ``\\xNN``, so that no byte can move the cursor or break the table."""
    return "".join(chr(b) if 32 <= b < 127 and b != 92 else "\\\\" if b == 92 else f"\\x{b:02x}"
                   for b in data)


def _how(answer) -> str:
    hot = {"mysql": "MySQL", "raw": "the hot files' bucket in HDFS (MySQL is still taking "
                                    "them in)",
           "none": "nowhere: no hot row has these keys"}[answer.hot.value]
    if answer.route == "mysql":
        where = f"the hot rows alone, from {hot} (no cold bucket for this id1)"
    elif answer.route == "merged":
        where = f"HBase (bucket {answer.bucket}) merged with the hot rows from {hot}"
    elif answer.route == "raw":
        where = (f"the raw HDFS files of bucket {answer.bucket} (not loaded into HBase yet; the "
                 f"same answer) merged with the hot rows from {hot}")
    else:
        where = (f"the hot rows ONLY, from {hot}, INCOMPLETE: bucket {answer.bucket} is not "
                 "loaded yet, its rows are missing and some of these may be superseded")
    waited = f"waited {answer.waited_s:.2f} s" if answer.waited else "answered at once"
    return f"{where}; load {answer.load_id}; {waited}"


@click.command("links")
# The bounds of debl.format.link.check_query: past them click refuses the argument as a usage error.
@click.argument("id1", type=click.IntRange(min=0, max=MAX_ID))
@click.argument("link_type", type=click.IntRange(min=0, max=MAX_ID))
@click.option("--min-time", type=click.IntRange(min=0, max=MAX_TIME), default=0, show_default=True)
@click.option("--max-time", type=click.IntRange(min=0, max=MAX_TIME), default=MAX_TIME)
@click.option("--offset", type=click.IntRange(min=0, max=MAX_COUNT), default=0,
              show_default=True)
@click.option("--limit", type=click.IntRange(min=0, max=MAX_COUNT), default=DEFAULT_LIMIT,
              show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Give up after S seconds if the bucket is not loaded (default: wait).")
@click.option("--partial", is_flag=True,
              help="At the timeout (default 0 with --partial) print the hot rows alone, marked "
                   "incomplete, instead of failing.")
@click.option("--count", "count", is_flag=True,
              help="count_link: print the number of visible links instead of the list.")
@click.option("--id2", "id2s", type=click.IntRange(min=0, max=MAX_ID), multiple=True,
              help="multiget_link: print the links to these id2s (repeat the option), hidden "
                   "ones included, in id2 order.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON; data is a latin-1 string (one character per byte).")
@click.pass_context
@friendly_errors
def links(ctx: click.Context, id1: int, link_type: int, min_time: int, max_time: int,
          offset: int, limit: int, timeout: float | None, partial: bool, count: bool,
          id2s: tuple[int, ...], as_json: bool) -> None:
    """Print the visible links of ID1 and LINK_TYPE, newest first, as DeBL answers them; with
    --count their number (count_link), with --id2 the links to those id2s (multiget_link).

    Waits for the system to be up and for ID1's bucket to be loaded into HBase, as a query of
    `debl query --target debl` would, or with the raw route on (coordinator.raw_after, in seconds)
    at most that long before reading the bucket's files in HDFS; --timeout bounds the wait.
    """
    # lazy import: the coordinator brings the HBase client, which would cost every `debl`
    # command's start-up (docs/ARCHITECTURE.md, "Lazy imports")
    from coordinator import Coordinator, CountLink, LinkList, MultigetLink

    listing = (min_time, max_time, offset, limit) != (0, MAX_TIME, 0, DEFAULT_LIMIT)
    if (count and id2s) or ((count or id2s) and listing):
        raise click.UsageError("--count, --id2 and the list's options (--min-time, --max-time, "
                               "--offset, --limit) ask three different questions: give one")
    operation = (CountLink(id1, link_type) if count else
                 MultigetLink(id1, link_type, id2s) if id2s else
                 LinkList(id1, link_type, min_time, max_time, offset, limit))
    asked_id2s = operation.id2s if isinstance(operation, MultigetLink) else ()  # as checked
    if partial and timeout is None:
        timeout = 0.0
    with Coordinator(config_of(ctx)) as coordinator:
        answer = coordinator.ask(operation, timeout=timeout, partial=partial)
        # An early answer is counted in the catalog before it is shown: a claim found false
        # later counts it, though this process is long gone (docs/COORDINATOR.md, "Answers
        # before uptime").
        coordinator.record_early_answers()
    if as_json:
        asked = ({"count": True} if count else {"id2s": list(asked_id2s)} if id2s else
                 {"min_time": min_time, "max_time": max_time, "offset": offset, "limit": limit})
        click.echo(json.dumps({
            "id1": id1, "link_type": link_type, **asked, "complete": answer.complete,
            "route": answer.route.value, "hot": answer.hot.value, "load_id": answer.load_id,
            "bucket": answer.bucket, "waited_s": answer.waited_s,
            **({"count": answer.count} if count else {"links": [
                {"id2": l.id2, "visibility": l.visibility, "time": l.time,
                 "version": l.version, "data": l.data.decode("latin-1")}
                for l in answer.links]})}, indent=2))
        return
    if count:
        click.echo(f"id1 {id1}, link_type {link_type}: {answer.count} visible "
                   f"link{'s' * (answer.count != 1)} (count_link) from {_how(answer)}")
        return
    n = len(answer.links)
    found = f"id1 {id1}, link_type {link_type}: {n} link{'s' * (n != 1)}"
    if id2s:
        found += f" of {len(asked_id2s)} id2s asked (multiget_link)"
    click.echo(f"{found} from {_how(answer)}")
    if not n:
        return
    rows: list[tuple[str, ...]] = [
        (str(l.id2), str(l.visibility), str(l.time), str(l.version), show_data(l.data))
        for l in answer.links]
    head: tuple[str, ...] = ("id2", "visible", "time", "version", "data")
    if not id2s:  # get_link_list shows visible links alone
        rows, head = [r[:1] + r[2:] for r in rows], head[:1] + head[2:]
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head) - 1)]
    click.echo("  ".join(h.rjust(w) for h, w in zip(head, widths)) + "  " + head[-1])
    for r in rows:
        click.echo("  ".join(v.rjust(w) for v, w in zip(r, widths)) + "  " + r[-1])
