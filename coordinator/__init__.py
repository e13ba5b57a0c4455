"""The DeBL coordinator: bucket state, routing, buffering, release, demand publication.

    from coordinator import Coordinator

    with Coordinator(config) as c:
        links = c.get_link_list(id1, link_type)          # list[Link], like a LinkStore
        answer = c.query(id1, link_type, timeout=5.0, partial=True)
        answer.complete, answer.waited_s, answer.route   # details of one query
        c.count_link(id1, link_type), c.multiget_link(id1, link_type, [id2, ...])
        c.ask(CountLink(id1, link_type)).count           # any of the three, with details

See docs/COORDINATOR.md for routing, the cross-store merge and buffering.
"""

from coordinator.coordinator import Coordinator
from coordinator.operations import CountLink, LinkList, MultigetLink
from coordinator.routes import Answer
from coordinator.state import BucketView
from coordinator.stats import CoordinatorStats

__all__ = ["Answer", "BucketView", "Coordinator", "CoordinatorStats", "CountLink", "LinkList",
           "MultigetLink"]
