"""Bring the whole local stack up, down, or report on it (with the Spark standalone cluster
when ``spark_workers`` > 0; ``down`` and ``status`` also find one left by an earlier config).

``up`` is idempotent: a service already answering is left alone; one whose process runs but does
not answer is waited for; one that is not running is started. It returns only when every service
has proved it answers. ``down`` stops in reverse order (HBase before the HDFS it lives on) and
keeps all data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from debl.config import Config
from debl.stack.services import Health, Service, all_services

# JVM services need a while on 2 cores: HBase's master waits for HDFS to leave safe mode and
# for its region server to check in before Thrift can list tables.
START_TIMEOUT = {"MariaDB": 60.0, "HDFS": 120.0, "HBase": 240.0, "Spark": 120.0}


@dataclass(frozen=True)
class ServiceStart:
    service: str
    seconds: float
    already_up: bool
    detail: str


def stack_up(config: Config, report: Callable[[str], None] = lambda _: None) -> list[ServiceStart]:
    """Start every service that is not answering and wait until all answer."""
    results = []
    for service in all_services(config):
        t0 = time.monotonic()
        already = service.running() and _answers(service)
        if already:
            results.append(ServiceStart(service.name, 0.0, True, "already up"))
            report(f"{service.name}: already up")
            continue
        report(f"{service.name}: starting")
        service.start()
        detail = service.wait_healthy(START_TIMEOUT[service.name])
        results.append(ServiceStart(service.name, time.monotonic() - t0, False, detail))
        report(f"{service.name}: up in {time.monotonic() - t0:.1f} s ({detail})")
    return results


def stack_down(config: Config, report: Callable[[str], None] = lambda _: None) -> None:
    for service in reversed(all_services(config, leftovers=True)):
        if service.stop():
            report(f"{service.name}: stopped")
        else:
            report(f"{service.name}: was not running")


def stack_status(config: Config) -> list[Health]:
    return [service.health() for service in all_services(config, leftovers=True)]


def _answers(service: Service) -> bool:
    try:
        service.probe()
    except Exception:
        return False
    return True
