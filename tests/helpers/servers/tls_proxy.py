"""A TLS-terminating gRPC proxy in front of a plaintext Temporal dev server
(which cannot serve TLS itself), with throwaway certificates.

:class:`TLSProxy` serves TLS (optionally demanding a client certificate, i.e.
mTLS) on 127.0.0.1, forwards every unary call with its metadata to the
server, and records the metadata, so a test sees the ``authorization``
header an API key becomes. :func:`make_certificates` writes a CA, a server
certificate for ``localhost``/``127.0.0.1`` and a client certificate, all
signed by that CA, with the ``cryptography`` package.
"""

from __future__ import annotations

import datetime
import ipaddress
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agentloop.workers.devserver import free_port

#: Headers gRPC sets itself, never forwarded by hand.
_TRANSPORT_HEADERS = {"user-agent", "content-type", "te", "host"}

#: Temporal's history pages and payloads can exceed gRPC's default 4 MB.
_MESSAGE_LIMITS = [("grpc.max_receive_message_length", 128 << 20), ("grpc.max_send_message_length", 128 << 20)]


@dataclass(frozen=True)
class Certificates:
    """PEM files: the CA, the server's certificate and key, a client's certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A throwaway CA and the certificates it signs, valid for a day."""
    now = datetime.datetime.now(datetime.UTC)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def build(subject: str, key: Any, issuer: str, issuer_key: Any, extensions: list[tuple[Any, bool]]) -> bytes:
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)

    def pem_key(key: Any) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = build("agentloop test CA", ca_key, "agentloop test CA", ca_key, [
        (x509.BasicConstraints(ca=True, path_length=None), True),
        (x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                       encipher_only=False, decipher_only=False), True),
    ])
    leaf = [(x509.BasicConstraints(ca=False, path_length=None), True)]
    server = build("localhost", server_key, "agentloop test CA", ca_key, [*leaf, (
        x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
        False), (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)])
    client = build("agentloop worker", client_key, "agentloop test CA", ca_key,
                   [*leaf, (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)])
    directory.mkdir(parents=True, exist_ok=True)
    files = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem",
                         directory / "client.pem", directory / "client-key.pem")
    for path, data in ((files.ca, ca), (files.server_cert, server), (files.server_key, pem_key(server_key)),
                       (files.client_cert, client), (files.client_key, pem_key(client_key))):
        path.write_bytes(data)
    return files


class _Forward(grpc.GenericRpcHandler):
    def __init__(self, upstream: str, seen: list[tuple[str, dict[str, str]]], lock: threading.Lock) -> None:
        self._channel = grpc.insecure_channel(upstream, options=_MESSAGE_LIMITS)
        self._seen, self._lock = seen, lock

    def service(self, handler_call_details: Any) -> Any:
        method = handler_call_details.method
        call = self._channel.unary_unary(method)

        def forward(request: bytes, context: Any) -> bytes:
            metadata = [(k, v) for k, v in context.invocation_metadata()
                        if not k.startswith((":", "grpc-")) and k not in _TRANSPORT_HEADERS]
            with self._lock:
                self._seen.append((method, dict(metadata)))
            future = call.future(request, metadata=metadata, timeout=context.time_remaining())
            context.add_callback(future.cancel)  # a poll the client gave up on ends upstream too
            try:
                return future.result()
            except grpc.RpcError as err:
                context.abort(err.code(), err.details() or "")
            except grpc.FutureCancelledError:
                context.abort(grpc.StatusCode.CANCELLED, "cancelled by the client")
            raise AssertionError("unreachable")

        return grpc.unary_unary_rpc_method_handler(forward)

    def close(self) -> None:
        self._channel.close()


class TLSProxy:
    """``with TLSProxy(upstream, certs, mtls=True) as proxy:`` serves TLS on
    :attr:`address` and forwards to ``upstream`` in plaintext.

    Args:
        upstream: The dev server's ``host:port``.
        certs: From :func:`make_certificates`.
        mtls: Refuse clients without a certificate the CA signed.
    """

    def __init__(self, upstream: str, certs: Certificates, *, mtls: bool = False) -> None:
        self.port = free_port()
        self.seen: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._handler = _Forward(upstream, self.seen, self._lock)
        # Workers hold a dozen long polls each; every call holds a thread.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=128), handlers=[self._handler],
                                   options=_MESSAGE_LIMITS)
        credentials = grpc.ssl_server_credentials(
            [(certs.server_key.read_bytes(), certs.server_cert.read_bytes())],
            root_certificates=certs.ca.read_bytes() if mtls else None,
            require_client_auth=mtls,
        )
        self._server.add_secure_port(f"127.0.0.1:{self.port}", credentials)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def authorizations(self) -> set[str]:
        """Every ``authorization`` header seen (None for calls without one)."""
        with self._lock:
            return {metadata.get("authorization") for _, metadata in self.seen}

    def __enter__(self) -> TLSProxy:
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(grace=None)
        self._handler.close()
