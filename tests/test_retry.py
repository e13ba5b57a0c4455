"""The retry policies, one per error class (docs/RELIABILITY.md, "Retries"), and ``retried``,
which runs a call's first attempt outside its policy: what is retried, how often, after which
waits, and what is raised after the last attempt. Pure logic: no service."""

from __future__ import annotations

import socket

import MySQLdb
import pymysql
import pytest
from tenacity import stop_after_attempt
from thriftpy2.transport import TTransportException

from debl.errors import ServiceError, SourceError
from debl.retry import retried
from debl.store.hbase import DROP_ATTEMPTS, RETRY_DROPPED_MEANWHILE, RETRY_LOST_TRANSPORT
from debl.store.linkbench_writes import RETRIES, RETRY_ROLLED_BACK
from debl.store.mysql import RETRY_LOST_CONNECTION
from loaders.http_client import RETRY_CUT_TRANSFER, RETRY_PAUSE_S, _TransferCut
from loaders.local_dist_ch import RETRY_BUCKET_WRITE


class Failing:
    """A call that raises each of *errors* in turn, then returns "done"; it records the waits
    its policy slept before each attempt after the first."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.waits: list[float] = []

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"

    def run(self, policy) -> str:
        return retried(policy.copy(sleep=self.waits.append), self)


def test_a_first_attempt_that_succeeds_never_enters_the_policy():
    entered = []
    policy = RETRY_BUCKET_WRITE.copy(before=entered.append)
    call = Failing()
    assert retried(policy, call) == "done" and call.calls == 1 and entered == []


def test_the_first_failure_counts_as_the_policys_first_attempt():
    call = Failing(*[ServiceError("write cut")] * 5)
    with pytest.raises(ServiceError, match="write cut"):  # the call's own error, not tenacity's
        call.run(RETRY_BUCKET_WRITE)
    assert call.calls == 3 and call.waits == pytest.approx([0.2, 0.4])


def test_an_error_the_policy_does_not_retry_is_raised_at_once():
    call = Failing(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        call.run(RETRY_BUCKET_WRITE)
    assert call.calls == 1 and call.waits == []


def test_a_retried_call_that_then_succeeds_returns_its_result():
    call = Failing(ServiceError("write cut"))
    assert call.run(RETRY_BUCKET_WRITE) == "done" and call.calls == 2


@pytest.mark.parametrize("lost", [MySQLdb.OperationalError(2013, "Lost connection"),
                                  MySQLdb.InterfaceError(0, ""),
                                  pymysql.err.OperationalError(2006, "gone away"),
                                  pymysql.err.InterfaceError(0, "")])
def test_a_lost_mysql_connection_is_tried_again_once_at_once(lost):
    call = Failing(lost, lost, lost)
    with pytest.raises(type(lost)):
        call.run(RETRY_LOST_CONNECTION)
    assert call.calls == 2 and call.waits == [0]


@pytest.mark.parametrize("refused", [MySQLdb.OperationalError(1176, "no such index"),
                                     pymysql.err.OperationalError(1045, "access denied"),
                                     pymysql.err.ProgrammingError(1146, "no such table")])
def test_a_mysql_error_that_is_no_lost_connection_is_not_retried(refused):
    call = Failing(refused)
    with pytest.raises(type(refused)):
        call.run(RETRY_LOST_CONNECTION)
    assert call.calls == 1


@pytest.mark.parametrize("rolled_back", [pymysql.err.OperationalError(1213, "Deadlock found"),
                                         pymysql.err.OperationalError(1205, "Lock wait timeout")])
def test_a_write_rolled_back_by_another_writer_is_run_again_at_once(rolled_back):
    call = Failing(*[rolled_back] * 10)
    with pytest.raises(pymysql.err.OperationalError):
        call.run(RETRY_ROLLED_BACK)
    assert call.calls == RETRIES + 1 and call.waits == [0] * RETRIES
    assert Failing(rolled_back, rolled_back).run(RETRY_ROLLED_BACK) == "done"


@pytest.mark.parametrize("other", [pymysql.err.OperationalError(2013, "Lost connection"),
                                   pymysql.err.IntegrityError(4025, "CONSTRAINT failed")])
def test_a_write_that_lost_its_connection_or_was_refused_is_not_run_again(other):
    """A lost connection's commit may have happened: the write is not sent twice."""
    call = Failing(other)
    with pytest.raises(type(other)):
        call.run(RETRY_ROLLED_BACK)
    assert call.calls == 1


@pytest.mark.parametrize("lost", [TTransportException(message="TSocket read 0 bytes"),
                                  BrokenPipeError(), EOFError()])
def test_a_lost_thrift_transport_is_tried_again_once(lost):
    call = Failing(lost, lost)
    with pytest.raises(type(lost)):
        call.run(RETRY_LOST_TRANSPORT)
    assert call.calls == 2


def test_a_thrift_call_that_timed_out_is_not_retried():
    """The server took the call and hangs: another try would only double the wait."""
    call = Failing(socket.timeout("timed out"))
    with pytest.raises(TimeoutError):
        call.run(RETRY_LOST_TRANSPORT)
    assert call.calls == 1


def test_a_refused_drop_is_looked_at_again_every_half_second():
    """Another client dropping the same table makes HBase refuse the drop with one of several
    exceptions (Thrift's own check says a bare ``IOException: table does not exist``): every
    refusal is looked at again; a lost transport is not this policy's."""
    from thriftpy2.thrift import TException
    from thriftpy2.transport import TTransportException

    class IOError_(TException):  # what happybase raises: a Thrift IOError with HBase's text
        def __init__(self, message: str) -> None:
            self.message = message

    for said in ("org.apache.hadoop.hbase.TableNotEnabledException: links",
                 "java.io.IOException: table does not exist"):
        meanwhile = IOError_(said)
        call = Failing(*[meanwhile] * 10)
        with pytest.raises(IOError_):
            call.run(RETRY_DROPPED_MEANWHILE)
        assert call.calls == DROP_ATTEMPTS and call.waits == [0.5] * (DROP_ATTEMPTS - 1)
    once = Failing(IOError_("java.io.IOException: table does not exist"))
    assert once.run(RETRY_DROPPED_MEANWHILE) == "done" and once.calls == 2
    lost = Failing(TTransportException(message="TSocket read 0 bytes"))
    with pytest.raises(TTransportException):
        lost.run(RETRY_DROPPED_MEANWHILE)
    assert lost.calls == 1


def test_a_cut_transfer_is_resumed_after_waits_that_double():
    call = Failing(*[_TransferCut("the connection closed early")] * 10)
    with pytest.raises(_TransferCut):
        call.run(RETRY_CUT_TRANSFER.copy(stop=stop_after_attempt(4)))  # a source's retries: 3
    assert call.calls == 4
    assert call.waits == pytest.approx([RETRY_PAUSE_S, 2 * RETRY_PAUSE_S, 4 * RETRY_PAUSE_S])


def test_only_a_resume_that_found_the_server_unreachable_is_tried_again():
    unreachable = SourceError("source http://127.0.0.1:1 is unreachable: refused")
    unreachable.__cause__ = ConnectionRefusedError()
    changed = SourceError("'f.tsv' changed while it was read")
    call = Failing(unreachable, changed)
    with pytest.raises(SourceError, match="changed while it was read"):
        call.run(RETRY_CUT_TRANSFER)
    assert call.calls == 2
