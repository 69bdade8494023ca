#pragma once
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

/// Makes an X.509 v3 certificate for `subject_key` with subject `CN=common_name`,
/// signed (ECDSA or RSA with SHA-256) by `issuer_key`. `issuer` is the issuer's
/// certificate, or NULL for a self-signed certificate (then `issuer_key` must be
/// `subject_key`'s private key). Valid from now + `not_before_offset` to now +
/// `not_after_offset` seconds.
///
/// `extensions` holds `extension_count` pairs of strings, name then value, in
/// OpenSSL's configuration syntax (x509v3_config(5)), e.g.
/// "basicConstraints", "critical,CA:TRUE" or "subjectAltName", "DNS:localhost".
/// The X509V3_CTX set-up is a macro-heavy API, hence this shim.
///
/// Returns a new certificate (free with X509_free), or NULL with the reason on
/// OpenSSL's error queue.
X509 *pg_shim_x509_issue(EVP_PKEY *subject_key, const char *common_name, X509 *issuer, EVP_PKEY *issuer_key,
                         uint64_t serial, long not_before_offset, long not_after_offset,
                         const char *const *extensions, size_t extension_count);
