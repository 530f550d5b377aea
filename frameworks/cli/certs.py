"""A throwaway local certificate authority (``agora up --tls``, tests), with ``cryptography``.

``LocalCA.create(name)`` makes a self-signed CA; ``ca.issue(name, hosts)`` a certificate and key
it signs, for a server (``hosts``: DNS names and IP addresses in its subjectAltName) or a client
(the CN names it, e.g. an agent); ``write_pem`` saves them (keys mode 0600). Short-lived (default
a week) and EC P-256: for a local cluster or a test, never a production PKI.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agora"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


@attrs.frozen
class Issued:
    cert_pem: bytes
    key_pem: bytes

    def write_pem(self, cert_path: Path, key_path: Path) -> tuple[Path, Path]:
        cert_path.parent.mkdir(parents=True, exist_ok=True)
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600)
        key_path.chmod(0o600)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


@attrs.frozen
class LocalCA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str = "agora local CA", days: float = 7.0) -> LocalCA:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write_ca(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.cert_pem)
        return path

    def issue(self, name: str, hosts: tuple[str, ...] = LOCAL_HOSTS, days: float = 7.0) -> Issued:
        """A certificate for ``name`` signed by this CA, good as a server certificate for ``hosts``
        and as a client certificate (serverAuth and clientAuth)."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(
            cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )


@attrs.frozen
class ClusterCerts:
    """The files ``agora up --tls`` wires: one CA, a certificate for the master, one shared by the
    local agents (server for their HTTP API, client for mTLS) and one for the framework services."""

    ca: Path
    master_cert: Path
    master_key: Path
    agent_cert: Path
    agent_key: Path
    # one (cert, key) per named agent: its CN is that agent's principal (mTLS + --authenticate-agents)
    per_agent: tuple[tuple[Path, Path], ...] = ()


def make_cluster_certs(
    directory: Path, hosts: tuple[str, ...] = LOCAL_HOSTS, agent_principals: tuple[str, ...] = ()
) -> ClusterCerts:
    """The CA, the master's and the shared agent certificate; and, for each of
    ``agent_principals``, a certificate whose subject CN is that principal (``agent-<i>.pem``): with
    ``--tls-require-client-cert --authenticate-agents`` the master takes it as the agent's
    principal, so one agent's certificate cannot re-register another agent's id."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = LocalCA.create()
    ca_path = ca.write_ca(directory / "ca.pem")
    mc, mk = ca.issue("agora-master", hosts).write_pem(directory / "master.pem", directory / "master-key.pem")
    ac, ak = ca.issue("agora-agent", hosts).write_pem(directory / "agent.pem", directory / "agent-key.pem")
    per_agent = tuple(
        ca.issue(p, hosts).write_pem(directory / f"agent-{i}.pem", directory / f"agent-{i}-key.pem")
        for i, p in enumerate(agent_principals)
    )
    return ClusterCerts(ca_path, mc, mk, ac, ak, per_agent)
