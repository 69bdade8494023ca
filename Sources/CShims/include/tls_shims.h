#pragma once
#include <openssl/ssl.h>

/// SSL_CTX_set_min_proto_version is a macro.
int pg_shim_ssl_ctx_set_min_tls12(SSL_CTX *context);

/// SSL_set_tlsext_host_name (SNI) is a macro.
int pg_shim_ssl_set_sni(SSL *ssl, const char *host_name);

/// SSL_set_mode is a macro: partial writes and a moving write buffer, as a
/// non-blocking stream needs.
void pg_shim_ssl_set_nonblocking_modes(SSL *ssl);
