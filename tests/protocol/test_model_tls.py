"""The model clients' TLS context: the CA bundle loaded only for an https endpoint."""

from __future__ import annotations

import ssl

from protocol.model.tls import ssl_context


def test_a_plain_http_endpoint_loads_no_certificate_and_its_context_trusts_none() -> None:
    context = ssl_context("http://127.0.0.1:8000/v1")
    assert context.cert_store_stats()["x509_ca"] == 0
    # Used by mistake, it would still verify, and fail, every handshake.
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_an_https_endpoint_verifies_against_the_ca_bundle_built_once() -> None:
    context = ssl_context("HTTPS://api.example.com/v1")
    assert context.cert_store_stats()["x509_ca"] > 0
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert ssl_context("https://other.example.com/v1") is context

