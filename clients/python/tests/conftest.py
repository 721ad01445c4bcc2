"""The broker the tests run against: a real `rebound serve` process per test module.

The binary is `REBOUND_BIN`, else the repository's target/release/rebound, else
target/debug/rebound. Without one the tests are skipped, saying why, except under
CI (`CI=true`), where they fail. Each broker listens on a free port of 127.0.0.1,
keeps its data, config and log in a temporary directory, and is killed after its
module; a test that fails prints its log.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

#: Enough to make a message fail fast and land on the DLQ queue (of the DLQ address).
DLQ_CONFIG = """
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 3
redelivery-delay = 50

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"""

LISTENING = "rebound listening on "


def rebound_bin() -> str:
    """The broker binary, or skip (fail under CI) saying why there is none."""
    candidates = [os.environ.get("REBOUND_BIN")] if os.environ.get("REBOUND_BIN") else [
        str(REPO / "target" / "release" / "rebound"),
        str(REPO / "target" / "debug" / "rebound"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    reason = f"no rebound binary at {' or '.join(str(c) for c in candidates)}: build it or set REBOUND_BIN"
    if os.environ.get("CI") == "true":
        pytest.fail(f"this test cannot run under CI: {reason}")
    pytest.skip(reason)


class Broker:
    """A `rebound serve` process with its own temporary directory."""

    def __init__(self, config: str = DLQ_CONFIG) -> None:
        self.bin = rebound_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="rebound-py-test-"))
        self.config = self.dir / "rebound.toml"
        self.config.write_text(config)
        self.log_path = self.dir / "broker.log"
        self.process: subprocess.Popen[str] | None = None
        self.addr = "127.0.0.1:0"
        self.start()

    def start(self, timeout: float = 20.0) -> None:
        """Starts the process, on the address it had if it ran before."""
        args = [self.bin, "serve", "--listen", self.addr, "--data-dir", str(self.dir / "data"), "--config", str(self.config)]
        if "http-listen" not in self.config.read_text():
            args += ["--http-listen", "127.0.0.1:0"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("REBOUND_")}
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.process.stdout
        assert stdout is not None

        def drain() -> None:
            # Keeps reading so that the broker never blocks on a full pipe.
            for line in stdout:
                lines.put(line)

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if line.startswith(LISTENING):
                self.addr = line[len(LISTENING) :].strip()
                return
        self.kill()
        raise RuntimeError(f"the broker did not start within {timeout} s; its log:\n{self.log()}")

    @property
    def url(self) -> str:
        return f"http://{self.addr}"

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, like a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 10 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def start_broker(request: pytest.FixtureRequest) -> Iterator[Callable[..., Broker]]:
    """Starts brokers for a module; kills them and removes their files after it."""
    started: list[Broker] = []

    def start(config: str = DLQ_CONFIG) -> Broker:
        broker = Broker(config)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.cleanup()


@pytest.fixture(scope="module")
def broker(start_broker: Callable[..., Broker]) -> Broker:
    """The module's broker, with `DLQ_CONFIG`."""
    return start_broker()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    broker = item.funcargs.get("broker") if hasattr(item, "funcargs") else None
    if report.failed and isinstance(broker, Broker):
        report.sections.append(("broker log", broker.log()[-20000:]))
    return report


def unique(prefix: str) -> str:
    """A queue or address name no other test uses."""
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
