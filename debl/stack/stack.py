"""Bring the whole local stack up, down, or report on it (with the Spark standalone cluster
when ``spark.workers`` > 0; ``down`` and ``status`` also find one left by an earlier config).

``up`` is idempotent: a service already answering is left alone; one whose process runs but does
not answer is waited for; one that is not running is started, and a service that lives on it
(HBase on HDFS) is started again with it. It returns only when every service
has proved it answers. ``down`` stops in reverse order (HBase before the HDFS it lives on) and
keeps all data.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable
from dataclasses import dataclass

from debl.config import Config
from debl.errors import ConfigError
from debl.stack.daemon import Daemon
from debl.stack.hbase import HBase
from debl.stack.hdfs import HDFS
from debl.stack.mariadb import MariaDB
from debl.stack.service import Health, Service
from debl.stack.source_db import SourceDB
from debl.stack.spark_cluster import SparkCluster

# JVM services need a while on 2 cores: HBase's master waits for HDFS to leave safe mode and
# for its region server to check in before Thrift can list tables.
START_TIMEOUT = {"MariaDB": 60.0, "Source DB": 60.0, "HDFS": 120.0, "HBase": 240.0,
                 "Spark": 120.0}


def all_services(config: Config, leftovers: bool = False) -> list[Service]:
    """The stack in start order (stop order is the reverse). The Spark cluster belongs to it
    when ``spark.workers`` > 0; with *leftovers*, also when one still runs from an earlier
    configuration (``stack down`` and ``status`` must not miss it)."""
    services: list[Service] = [MariaDB(config), SourceDB(config), HDFS(config), HBase(config)]
    spark = SparkCluster(config)
    if config.spark.workers > 0 or (leftovers and any(d.pid() for d in spark.daemons)):
        services.append(spark)
    return services


@dataclass(frozen=True)
class ServiceStart:
    service: str
    seconds: float
    already_up: bool
    detail: str


def stack_up(config: Config, report: Callable[[str], None] = lambda _: None) -> list[ServiceStart]:
    """Start every service that is not answering and wait until all answer. Two at once (two
    commands, two test processes) take turns: the second finds the services up."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with open(config.state_dir / "stack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _stack_up(config, report)


def _stack_up(config: Config, report: Callable[[str], None]) -> list[ServiceStart]:
    results = []
    started: set[str] = set()
    for service in all_services(config):
        t0 = time.monotonic()
        below = started & set(service.lives_on)
        if below and service.running():
            # It answers reads, but its open files (HBase's write-ahead log) point at the
            # daemons that died: its next write would abort it. Start it again on fresh ones.
            report(f"{service.name}: restarting ({', '.join(sorted(below))} under it was "
                   "started again)")
            service.stop()
        elif service.running() and _answers(service):
            results.append(ServiceStart(service.name, 0.0, True, "already up"))
            report(f"{service.name}: already up")
            continue
        if not service.running():  # a daemon of it is started, not only waited for
            started.add(service.name)
        report(f"{service.name}: starting")
        results.append(_start(service, t0, report))
    return results


def _start(service: Service, t0: float, report: Callable[[str], None]) -> ServiceStart:
    """Start what is not running of *service* and wait until it answers."""
    service.start()
    detail = service.wait_healthy(START_TIMEOUT[service.name])
    report(f"{service.name}: up in {time.monotonic() - t0:.1f} s ({detail})")
    return ServiceStart(service.name, time.monotonic() - t0, False, detail)


def stack_down(config: Config, report: Callable[[str], None] = lambda _: None) -> None:
    for service in reversed(all_services(config, leftovers=True)):
        if service.stop():
            report(f"{service.name}: stopped")
        else:
            report(f"{service.name}: was not running")


def _find(config: Config, name: str) -> tuple[Service, list[Daemon]]:
    """A service by its name (``mariadb``, ``source-db``, ``hdfs``, ``hbase``: all its daemons)
    or one daemon by its own (``namenode``, ``datanode``, ``hbase-master``, ``thrift``)."""
    services = all_services(config)
    for service in services:
        if service.key == name.lower():
            return service, service.daemons
        for daemon in service.daemons:
            if daemon.name == name.lower():
                return service, [daemon]
    raise ConfigError(f"no service or daemon {name!r} in the stack: choose one of "
                      f"{', '.join(service_names(config))}")


def service_names(config: Config) -> list[str]:
    """What ``stack_stop`` and ``stack_start`` accept: services, then single daemons."""
    services = all_services(config)
    return ([s.key for s in services]
            + [d.name for s in services for d in s.daemons if len(s.daemons) > 1])


def stack_stop(config: Config, name: str, crash: bool = False,
               report: Callable[[str], None] = lambda _: None) -> bool:
    """Stop one service or daemon (SIGTERM, then SIGKILL after a while; with *crash*
    SIGKILL at once, as a crash would); the rest of the stack keeps running. True if anything
    was running. For fault trials (docs/RELIABILITY.md) and maintenance; HBase lives on HDFS, so
    stopping HDFS under a running HBase takes HBase down with it."""
    _, daemons = _find(config, name)
    stopped = False
    for daemon in reversed(daemons):
        if daemon.stop(crash=crash):
            report(f"{daemon.name}: {'killed' if crash else 'stopped'}")
            stopped = True
        else:
            report(f"{daemon.name}: was not running")
    return stopped


def stack_start(config: Config, name: str, report: Callable[[str], None] = lambda _: None
                ) -> ServiceStart:
    """Start what is not running of the service *name* belongs to (a daemon's name starts
    its whole service: HDFS for ``datanode``) and wait until it answers."""
    service, _ = _find(config, name)
    t0 = time.monotonic()
    if service.running() and _answers(service):
        report(f"{service.name}: already up")
        return ServiceStart(service.name, 0.0, True, "already up")
    return _start(service, t0, report)


def stack_status(config: Config) -> list[Health]:
    return [service.health() for service in all_services(config, leftovers=True)]


def _answers(service: Service) -> bool:
    try:
        service.probe()
    except Exception:
        return False
    return True
