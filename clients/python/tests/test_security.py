"""TLS and login: a broker with a certificate of a test CA and a user; the client
logs in with a password or a client certificate, and is refused otherwise with
the broker's own message."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Broker, rebound_bin, unique, wait_for
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import rebound
from rebound import Job, OutgoingMessage, errors

PASSWORD = "a long test password"


def issue(
    directory: Path, name: str, subject: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate (self-signed when `issuer` is None) and its key, written as
    `name.pem` and `name.key`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject_name)
        .issuer_name(issuer[0].subject if issuer else subject_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    (directory / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, key


@pytest.fixture(scope="module")
def secure(start_broker: Callable[..., Broker], tmp_path_factory: pytest.TempPathFactory) -> tuple[Broker, Path]:
    """A broker speaking only TLS, with the user alice (password or certificate)."""
    certs = tmp_path_factory.mktemp("certs")
    ca = issue(certs, "ca", "rebound test CA", None)
    issue(certs, "server", "localhost", ca)
    issue(certs, "alice", "alice", ca)
    hashed = subprocess.run(
        [rebound_bin(), "user", "hash-password"], input=PASSWORD + "\n", capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    config = f"""
[tls]
cert-file = "{certs / 'server.pem'}"
key-file = "{certs / 'server.key'}"
client-ca-file = "{certs / 'ca.pem'}"

[[users]]
name = "alice"
password-hash = "{hashed}"
roles = ["admin"]

[[security-settings]]
match = "#"
send = ["admin"]
consume = ["admin"]
browse = ["admin"]
create-address = ["admin"]
delete-address = ["admin"]
create-queue = ["admin"]
delete-queue = ["admin"]
manage = ["admin"]
"""
    return start_broker(config), certs


def test_tls_and_password_login(secure: tuple[Broker, Path]) -> None:
    broker, certs = secure
    url = f"https://{broker.addr}"
    with rebound.Client(url, ca_cert=certs / "ca.pem", user="alice", password=PASSWORD) as client:
        q = unique("secure")
        client.admin.create_queue(q, q, rebound.ANYCAST)
        client.send(OutgoingMessage(q, b"secret"))
        with client.consumer(q) as consumer:
            delivery = consumer.receive(timeout=10)
            assert delivery is not None and delivery.message.body == b"secret"
            consumer.ack(delivery)
    with rebound.Client(url, ca_cert=certs / "ca.pem", user="alice", password="wrong") as client:
        with pytest.raises(errors.Unauthenticated, match=r"invalid user name or password \(UNAUTHENTICATED\)"):
            client.admin.list_queues()
    with rebound.Client(url, ca_cert=certs / "ca.pem") as client:
        with pytest.raises(errors.Unauthenticated):
            client.send(OutgoingMessage("anything", b"x"))


def test_client_certificate_login(secure: tuple[Broker, Path]) -> None:
    broker, certs = secure

    async def main() -> None:
        async with rebound.aio.Client(
            f"https://{broker.addr}",
            ca_cert=certs / "ca.pem",
            client_cert=certs / "alice.pem",
            client_key=certs / "alice.key",
        ) as client:
            assert (await client.admin.server_info()).version

    asyncio.run(main())


def test_plaintext_to_a_tls_broker_does_not_connect(secure: tuple[Broker, Path]) -> None:
    broker, _ = secure
    with pytest.raises(errors.ConnectError):
        rebound.Client(broker.url, connect_timeout=1)
    with pytest.raises(errors.TlsError, match="cannot read the CA certificate"):
        rebound.Client(f"https://{broker.addr}", ca_cert="/nonexistent/ca.pem")


def test_worker_over_tls_with_login(secure: tuple[Broker, Path]) -> None:
    broker, certs = secure
    url = f"https://{broker.addr}"
    q = unique("secure")
    done = threading.Event()
    worker = rebound.Worker(url, ca_cert=str(certs / "ca.pem"), user="alice", password=PASSWORD)

    @worker.handler(q)
    def handle(job: Job) -> None:
        done.set()

    with rebound.Client(url, ca_cert=certs / "ca.pem", user="alice", password=PASSWORD) as client:
        client.admin.create_queue(q, q, rebound.ANYCAST)
        client.send(OutgoingMessage(q, b"job"))
        thread = threading.Thread(target=lambda: asyncio.run(worker.run_async()))
        thread.start()
        try:
            assert done.wait(timeout=30), "the worker did not handle the job"
        finally:
            worker.stop()
            thread.join(timeout=30)
        wait_for(lambda: client.admin.queue(q).messages == 0, what="the job's ack")
