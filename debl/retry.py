"""A call under a retry policy (tenacity), its first attempt outside the policy.

Every error class DeBL retries has one named tenacity policy, defined beside the code that meets
it (docs/RELIABILITY.md, "Retries", lists them with their bounds). ``retried`` runs a call under
one: the first attempt is a plain call, and only if it raises does the policy take over, counting
that failure as its attempt 1 (its wait, then attempt 2, ...), so the outcome is what the policy
alone would give.

Why not the policy alone: tenacity's own work took about 20 µs of CPU a call, against a MySQL
``get_link_list``'s 48 µs of client CPU, and the stores and an HTTP stream's reads are called at
that rate (docs/RELIABILITY.md, "Retries", has the measurement).

Pitfalls:

- A policy should say ``reraise=True``: after its last attempt the call's own exception is
  raised, for the caller to word (the service, the next step), not tenacity's ``RetryError``.
- The policy is copied for each call that fails: tenacity keeps a call's state on the policy
  object, which many threads share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from tenacity import Retrying

P = ParamSpec("P")
T = TypeVar("T")


def retried(policy: Retrying, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)``, retried as *policy* says once its first attempt raised."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        first: Exception | None = exc

    def attempt() -> T:
        nonlocal first
        if first is not None:  # the policy's attempt 1 is the one already made
            failed, first = first, None
            raise failed
        return call(*args, **kwargs)

    return policy.copy()(attempt)
