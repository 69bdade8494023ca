#include "tls_shims.h"

int pg_shim_ssl_ctx_set_min_tls12(SSL_CTX *context) {
    return (int)SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}

int pg_shim_ssl_set_sni(SSL *ssl, const char *host_name) {
    return (int)SSL_set_tlsext_host_name(ssl, host_name);
}

void pg_shim_ssl_set_nonblocking_modes(SSL *ssl) {
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
