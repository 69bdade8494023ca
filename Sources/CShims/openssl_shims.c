#include "openssl_shims.h"
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>

unsigned long pg_shim_openssl_version_number(void) { return OPENSSL_VERSION_NUMBER; }

/* OpenSSL frees its global state from an atexit handler. A process that exits while
   another of its threads still uses OpenSSL (an event loop in a TLS handshake, a
   test process whose servers are still up) then crashes inside exit(): "double free
   or corruption", exit status 134 instead of 0. Without the handler the memory simply
   goes with the process. Runs at load, before any other OpenSSL call decides. */
__attribute__((constructor)) static void pg_shim_openssl_without_atexit_cleanup(void) {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

EVP_PKEY *pg_shim_EVP_EC_gen(const char *curve) { return EVP_EC_gen(curve); }

long pg_shim_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

EVP_PKEY *pg_shim_ec_public_key_from_point(const char *group, const unsigned char *point, size_t length) {
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, length);
    params[2] = OSSL_PARAM_construct_end();

    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    if (EVP_PKEY_fromdata_init(context) != 1 || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    return key;
}
