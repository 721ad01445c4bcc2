"""The worker against a real broker: every handler outcome, an outage that
dead-letters nothing, a poison job dead-lettered with its exception's text and
retried back, SIGTERM during work through the `rebound-worker` command, and
resubscribing after a broker restart."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import Broker, unique, wait_for

import rebound
from rebound import DependencyDown, Job, OutgoingMessage, Permanent, TemporarilyUnavailable


@contextmanager
def running(worker: rebound.Worker) -> Iterator[rebound.Worker]:
    """Runs the worker in a thread of its own; stops it gracefully after."""
    result: list[rebound.WorkerStats] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(worker.run_async())))
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop within 30 s"


def dead_letters(client: rebound.Client, queue: str) -> list[dict[str, str]]:
    """The DLQ's messages that failed on `queue`: body and the broker's properties."""
    found = client.admin.browse("DLQ", selector=f"_AMQ_ORIG_QUEUE = '{queue}'")
    return [
        {"body": m.message.body.decode()}
        | {k: v.string for k, v in m.message.properties.items() if v.WhichOneof("value") == "string"}
        for m in found
    ]


def test_handler_outcomes(broker: Broker) -> None:
    q, q_async = unique("jobs"), unique("jobs")
    attempts: dict[str, int] = {}
    done: list[str] = []
    fixed = threading.Event()
    worker = rebound.Worker(broker.url)

    @worker.handler(q, concurrency=4)
    def handle(job: Job) -> None:
        body = job.body.decode()
        attempts[body] = job.delivery_count
        if body == "retry" and job.delivery_count == 1:
            raise TemporarilyUnavailable("busy", retry_after=0.3)
        if body == "permanent":
            raise Permanent("bad schema")
        if body == "poison" and not fixed.is_set():
            raise ValueError("cannot parse order 7")
        done.append(body)

    @worker.handler(q_async, concurrency=2)
    async def handle_async(job: Job) -> None:
        await asyncio.sleep(0.01)
        if job.body == b"boom":
            raise RuntimeError("async handler failed")
        done.append("async " + job.body.decode())

    with rebound.Client(broker.url) as client:
        for name in (q, q_async):
            client.admin.create_queue(name, name, rebound.ANYCAST)
    with rebound.Client(broker.url) as client, running(worker):
        for body in ["ok", "retry", "permanent", "poison"]:
            client.send(OutgoingMessage(q, body.encode()))
        client.send(OutgoingMessage(q_async, b"fine"))
        client.send(OutgoingMessage(q_async, b"boom"))
        wait_for(
            lambda: len(dead_letters(client, q)) == 2 and len(dead_letters(client, q_async)) == 1 and "retry" in done,
            what="3 dead letters and the retried job",
        )
        assert sorted(done) == ["async fine", "ok", "retry"]
        assert attempts["retry"] == 2 and attempts["poison"] == 3 and attempts["permanent"] == 1
        by_body = {d["body"]: d for d in dead_letters(client, q)}
        assert by_body["permanent"]["_REBOUND_DEAD_LETTER_REASON"] == "rejected: bad schema"
        assert by_body["poison"]["_REBOUND_DEAD_LETTER_REASON"] == "max-delivery-attempts"
        failures = json.loads(by_body["poison"]["_REBOUND_FAILURES"])
        assert "ValueError: cannot parse order 7" in json.dumps(failures)
        assert "RuntimeError: async handler failed" in dead_letters(client, q_async)[0]["_REBOUND_FAILURES"]

        # The bug is fixed: the poison job goes back to its queue and succeeds.
        fixed.set()
        retried = client.admin.retry_messages("DLQ", f"_AMQ_ORIG_QUEUE = '{q}' AND _REBOUND_DEAD_LETTER_REASON = 'max-delivery-attempts'")
        assert retried.moved == 1
        wait_for(lambda: "poison" in done and client.admin.queue(q).messages == 0, what="the retried poison job")
    stats = worker.stats
    assert (stats.acked, stats.retried, stats.dead_lettered) == (4, 1, 1)
    assert stats.failed == 3 + 3  # the poison job's attempts and the async one's


def test_dependency_down_dead_letters_nothing(broker: Broker) -> None:
    q = unique("outage")
    outage_ends = [0.0]
    done: set[str] = set()
    worker = rebound.Worker(broker.url)

    @worker.handler(q, concurrency=4)
    def handle(job: Job) -> None:
        if time.monotonic() < outage_ends[0]:
            raise DependencyDown("database unreachable", pause=0.5)
        done.add(job.body.decode())

    with rebound.Client(broker.url) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
        outage_ends[0] = time.monotonic() + 3.0
        with running(worker):
            for i in range(20):
                client.send(OutgoingMessage(q, str(i).encode()))
            while time.monotonic() < outage_ends[0]:
                assert client.admin.count_messages("DLQ", f"_AMQ_ORIG_QUEUE = '{q}'") == 0
                assert not done, "a job succeeded during the outage"
                time.sleep(0.2)
            wait_for(lambda: len(done) == 20, timeout=60, what="every job after the outage")
        assert client.admin.count_messages("DLQ", f"_AMQ_ORIG_QUEUE = '{q}'") == 0
        assert client.admin.queue(q).messages == 0
    assert worker.stats.retried > 0 and worker.stats.dead_lettered == 0


JOBS = '''
import os, time
import rebound

worker = rebound.Worker()

@worker.handler(os.environ["JOBS_QUEUE"], concurrency=4)
def handle(job: rebound.Job) -> None:
    with open(os.environ["STARTED_FILE"], "a") as f:
        f.write(f"{job.duplicate_id} {job.delivery_count}\\n")
    with open(os.environ["DONE_FILE"]) as f:
        if job.duplicate_id in f.read().split():
            return  # idempotent: done already
    time.sleep(0.2)
    with open(os.environ["DONE_FILE"], "a") as f:
        f.write(f"{job.duplicate_id}\\n")
'''


def test_sigterm_during_work_loses_nothing_and_repeats_nothing(broker: Broker, tmp_path: Path) -> None:
    q = unique("term")
    (tmp_path / "jobs.py").write_text(textwrap.dedent(JOBS))
    started, done = tmp_path / "started", tmp_path / "done"
    started.touch()
    done.touch()
    env = os.environ | {
        "REBOUND_SERVER": broker.url,
        "JOBS_QUEUE": q,
        "STARTED_FILE": str(started),
        "DONE_FILE": str(done),
    }
    command = [str(Path(sys.executable).parent / "rebound-worker"), "jobs:worker"]

    def lines(path: Path) -> list[str]:
        return path.read_text().split("\n")[:-1]

    with rebound.Client(broker.url) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
        client.send_batch([OutgoingMessage(q, b"job", duplicate_id=f"job-{i}") for i in range(40)])
        for _ in range(2):
            worker = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: len(lines(done)) >= 40 or len(lines(started)) > len(lines(done)) + 2, what="work in progress")
                worker.send_signal(signal.SIGTERM)
                _, log = worker.communicate(timeout=30)
            finally:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
            assert worker.returncode == 0, log
            assert "worker stopped" in log, log
            # Graceful: what it had started, it finished and acknowledged.
            assert client.admin.queue(q).delivering == 0
        if len(lines(done)) < 40:
            worker = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL, text=True)
            try:
                wait_for(lambda: len(lines(done)) >= 40, timeout=60, what="every job done")
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=30)
        wait_for(lambda: client.admin.queue(q).messages == 0, what="an empty queue")
    assert sorted(lines(done)) == sorted(f"job-{i}" for i in range(40)), "a job was lost or done twice"
    # Released, not failed: no job was delivered twice or counted an attempt.
    assert sorted(lines(started)) == sorted(f"job-{i} 1" for i in range(40))


def test_resubscribes_after_a_broker_restart(start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    q = unique("restart")
    done: list[bytes] = []
    worker = rebound.Worker(broker.url)

    @worker.handler(q)
    def handle(job: Job) -> None:
        done.append(job.body)

    with rebound.Client(broker.url) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
    with running(worker):
        with rebound.Client(broker.url) as client:
            client.send(OutgoingMessage(q, b"before"))
            wait_for(lambda: done == [b"before"] and client.admin.queue(q).messages == 0, what="the first job")
        broker.stop()
        time.sleep(0.5)
        broker.start()
        with rebound.Client(broker.url) as client:
            client.send(OutgoingMessage(q, b"after"))
            wait_for(lambda: done == [b"before", b"after"], timeout=30, what="the job sent after the restart")
    assert worker.stats.reconnects >= 1


def test_runs_up_to_concurrency_calls_at_once(broker: Broker) -> None:
    q = unique("conc")
    lock = threading.Lock()
    now = [0]
    peak = [0]
    done: list[bytes] = []
    worker = rebound.Worker(broker.url)

    @worker.handler(q, concurrency=4)
    def handle(job: Job) -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.3)
        with lock:
            now[0] -= 1
            done.append(job.body)

    with rebound.Client(broker.url) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
        client.send_batch([OutgoingMessage(q, str(i).encode()) for i in range(12)])
        with running(worker):
            wait_for(lambda: len(done) == 12, what="12 jobs")
    assert peak[0] == 4


def test_cli_refuses_what_is_not_a_worker(tmp_path: Path) -> None:
    (tmp_path / "notjobs.py").write_text("worker = 42\n")
    command = str(Path(sys.executable).parent / "rebound-worker")
    for spec, expected in [("notjobs:worker", "is of type int, not a rebound.Worker"), ("notjobs", "expected MODULE:ATTRIBUTE")]:
        result = subprocess.run([command, spec], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and expected in result.stderr, result.stderr


def test_an_async_handler_behind_a_partial_runs_on_the_loop(broker: Broker) -> None:
    q = unique("partial")
    done: list[tuple[str, bytes]] = []
    worker = rebound.Worker(broker.url)

    async def record(tag: str, job: Job) -> None:
        await asyncio.sleep(0)
        done.append((tag, job.body))

    worker.handler(q)(functools.partial(record, "tagged"))
    with rebound.Client(broker.url) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
        client.send(OutgoingMessage(q, b"job"))
        with running(worker):
            wait_for(lambda: done == [("tagged", b"job")], what="the job")
