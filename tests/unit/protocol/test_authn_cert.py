"""An agent's verified client certificate as its credential (protocol.authn.certificate_identity)."""

from __future__ import annotations

from protocol.authn import AGENT, Authenticated, AuthFailed, certificate_identity, certificate_names

CERT = {
    "subject": ((("organizationName", "agora"),), (("commonName", "agent-a"),)),
    "subjectAltName": (("DNS", "localhost"), ("IP Address", "127.0.0.1"), ("DNS", "agent-a")),
}


def test_names_are_the_cn_then_the_sans_without_repeats() -> None:
    assert certificate_names(CERT) == ("agent-a", "localhost", "127.0.0.1")
    assert certificate_names({"subjectAltName": (("DNS", "only-san"), ("email", "x@y"))}) == ("only-san",)
    assert certificate_names(None) == () and certificate_names({}) == ()


def test_without_a_header_the_certificate_names_the_principal() -> None:
    assert certificate_identity(None, ("agent-a", "localhost")) == Authenticated("agent-a", AGENT)
    assert isinstance(certificate_identity(None, ()), AuthFailed)


def test_a_header_must_agree_with_the_certificate() -> None:
    names = certificate_names(CERT)
    assert certificate_identity(Authenticated("agent-a", AGENT), names) == Authenticated("agent-a", AGENT)
    other = certificate_identity(Authenticated("agent-b", AGENT), names)
    assert isinstance(other, AuthFailed) and "'agent-b' is not named by the client certificate" in other.reason
    bad = certificate_identity(AuthFailed("invalid credentials"), names)
    assert bad == AuthFailed("invalid credentials")  # a bad header is never rescued by the certificate
