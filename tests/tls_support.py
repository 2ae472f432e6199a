"""A test CA and a server certificate it signed for 127.0.0.1, in PEM files: a TLS peer whose CA a
test trusts through `SSL_CERT_FILE`, as a deployment trusts its CA bundle (the HTTP LLM advisor's
and the outbound HTTP/1.1 client's tests)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _certificate(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
                 signing_key: ec.EllipticCurvePrivateKey, ca: bool,
                 names: list[x509.GeneralName]) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                              critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        builder = (builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]),
                                  critical=False))
    return builder.sign(signing_key, hashes.SHA256())


def tls_files(folder: Path) -> Path:
    """Write `ca.pem` (a CA) and `server.pem` (a certificate it signed for 127.0.0.1, with its
    key) into `folder`; returns `folder`."""
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "decision gate test CA")])
    ca = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, True, [])
    server = _certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name,
                          server_key.public_key(), ca_key, False,
                          [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    key = server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    (folder / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM) + key)
    return folder
