"""The stack's Spark standalone cluster, when ``spark.workers`` > 0 (docs/RUNTIME.md): a master
and its workers, run by the installed pyspark's own scripts and jars.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import psutil
from tenacity import (Retrying, retry_if_exception_type, retry_if_not_exception_type,
                      retry_if_result, stop_after_delay, wait_fixed)

from debl.errors import StackError
from debl.stack.daemon import Daemon
from debl.stack.jvm_service import LOG4J2
from debl.stack.service import Service, require_free


class SparkCluster(Service):
    """A Spark standalone master and ``spark.workers`` workers, run by the installed pyspark's
    ``bin/spark-class`` (its own jars, nothing downloaded), every port from config and on
    127.0.0.1 (SPARK_LOCAL_IP binds the web UIs there too).

    Executors are the workers' children, started per application and ended with it (or with
    their worker: a worker stopping kills its executors); they and their Python workers run in
    ``work-<i>/`` and ``local-<i>/``, so no process of the cluster lives outside its home.
    Workers beyond ``spark.workers`` (left by an earlier, larger configuration) are stopped by
    ``start`` and ``stop``.
    """

    name = "Spark"

    @property
    def slug(self) -> str:
        # Not ".debl/spark": Daemon.pid recognises a daemon by its home in the command line,
        # and every local[N] driver's names ".debl/spark-tmp" (its spark.local.dir).
        return "spark-standalone"

    @property
    def daemons(self) -> list[Daemon]:
        left = [int(p.stem.rsplit("-", 1)[1]) for p in self.home.glob("spark-worker-*.pid")
                if p.stem.rsplit("-", 1)[1].isdigit()]
        count = max([self.config.spark.workers, *left])
        return [Daemon("spark-master", self.home),
                *(Daemon(f"spark-worker-{i}", self.home) for i in range(1, count + 1))]

    @property
    def address(self) -> str:
        return f"{self.config.spark.url}, ui :{self.config.spark.master_webui_port}"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    def spark_home(self) -> Path:
        try:
            # lazy import: pyspark would cost every `debl` command's start-up (docs/ARCHITECTURE.md,
            # "Lazy imports"); only the cluster's start needs its install path
            import pyspark
        except ImportError:
            raise StackError(self.name, "pyspark is not installed: run scripts/setup.sh") from None
        home = Path(pyspark.__file__).parent
        if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
            raise StackError(self.name, f"{home} has no bin/spark-class and jars/: reinstall "
                             "pyspark (scripts/setup.sh)")
        return home

    def daemon_env(self, **extra: str) -> dict[str, str]:
        """The environment of the cluster's daemons (and of the launcher that builds their
        command line): no ``SPARK_*`` of the caller, this cluster's home and conf, *extra*."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        # The daemons only schedule and the launcher only prints a command line: the C1 JIT and
        # the serial GC start them on much less CPU (docs/RUNTIME.md, "Spark on a cluster", has
        # the figures; scripts/spark_master_cpu.py measures it).
        quick = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        env.update(SPARK_HOME=str(self.spark_home()), SPARK_CONF_DIR=str(self.conf_dir),
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY=self.config.spark.daemon_memory,
                   SPARK_DAEMON_JAVA_OPTS=quick, SPARK_LAUNCHER_OPTS=quick,
                   SPARK_LOG_DIR=str(self.home / "logs"), **extra)
        return env

    def daemon_argv(self, main_class: str, *args: str) -> list[str]:
        """The command line of the daemon *main_class* with *args*, through pyspark's
        ``spark-class``."""
        # --properties-file puts the home in the command line, which Daemon.pid relies on.
        return [str(self.spark_home() / "bin" / "spark-class"), main_class,
                "--properties-file", str(self.conf_dir / "spark-defaults.conf"), *args]

    def start(self) -> None:
        c = self.config
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2)
        # An executor's stdout and stderr files under work-<i>/ grow with its application; a
        # worker removes those of applications ended over a day ago.
        (self.conf_dir / "spark-defaults.conf").write_text(
            "spark.worker.cleanup.enabled true\n"
            "spark.worker.cleanup.appDataTtl 86400\n")
        master, *workers = self.daemons
        for index, worker in enumerate(workers, start=1):
            if index > c.spark.workers:
                worker.stop()
        if master.pid() is None:
            require_free(master, c.spark.master_port, c.spark.master_webui_port)
            master.start(self.daemon_argv(
                "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                "--port", str(c.spark.master_port), "--webui-port", str(c.spark.master_webui_port)),
                env=self.daemon_env(), cwd=self.home)
        # A worker that finds no master retries only after 5-15 s: start them once it answers.
        try:
            Retrying(retry=retry_if_exception_type(Exception)
                     & retry_if_not_exception_type(StackError), stop=stop_after_delay(90),
                     wait=wait_fixed(0.5), reraise=True)(self._master_alive, master)
        except StackError:
            raise
        except Exception as exc:
            raise master.failure(f"did not answer within 90 s ({exc})") from exc
        for index, worker in enumerate(workers[:c.spark.workers], start=1):
            if worker.pid() is not None:
                continue
            port, ui = c.spark.worker_port + index - 1, c.spark.worker_webui_port + index - 1
            require_free(worker, port, ui)
            work, local = self.home / f"work-{index}", self.home / f"local-{index}"
            work.mkdir(exist_ok=True)
            local.mkdir(exist_ok=True)
            worker.start(self.daemon_argv(
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui), "--cores", str(c.spark.worker_cores),
                "--memory", c.spark.worker_memory, "--work-dir", str(work), c.spark.url),
                env=self.daemon_env(SPARK_LOCAL_DIRS=str(local)), cwd=self.home)

    def _master_alive(self, master: Daemon) -> dict:
        if master.exited():
            raise master.failure("the Spark master exited during start-up")
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.config.spark.master_webui_port}/json/", timeout=5) as r:
            state = json.load(r)
        if state.get("status") != "ALIVE":
            raise RuntimeError(f"master is {state.get('status')}")
        return state

    def stop(self) -> bool:
        """Stop the workers and the master, then every process still working in the cluster's
        home: a worker ends its executors as it stops, but asynchronously, and a worker killed
        after its grace period leaves them orphaned. Returns once none is left."""
        stopped = super().stop()
        for attempt in range(2):
            left = self._processes()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL if attempt else signal.SIGTERM)
                except ProcessLookupError:
                    pass
            # Until none is left, or for 30 s after SIGTERM (then SIGKILL), 10 s after SIGKILL.
            Retrying(retry=retry_if_result(bool), wait=wait_fixed(0.2),
                     stop=stop_after_delay(30.0 if attempt == 0 else 10.0),
                     retry_error_callback=lambda _: None)(self._processes)
            stopped = True
        return stopped

    def _processes(self) -> list[int]:
        """Processes whose command line or working directory is under the cluster's home
        (executors and their Python workers run in work-<i>/ and local-<i>/)."""
        home, found = f"{self.home}/", []
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cmdline, cwd = proc.info["cmdline"], proc.info["cwd"]
            if proc.pid == os.getpid() or cmdline is None or cwd is None:
                continue  # this process, or one not ours (nor the cluster's)
            if home in " ".join(cmdline) or f"{cwd}/".startswith(home):
                found.append(proc.pid)
        return found

    def probe(self) -> str:
        """The master's own account (/json on its web UI): ALIVE, with every worker of the
        config registered and ALIVE."""
        state = self._master_alive(self.daemons[0])
        alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        want = self.config.spark.workers
        if want == 0:
            raise RuntimeError("left running by an earlier configuration (spark.workers is 0 "
                               "now): `debl stack down` stops it")
        if len(alive) != want:
            raise RuntimeError(f"{len(alive)} of {want} workers registered")
        return (f"{len(alive)} workers, cores {state['coresused']}/{state['cores']} used, "
                f"memory {state['memoryused']}/{state['memory']} MiB used, "
                f"{len(state.get('activeapps', []))} application(s)")
