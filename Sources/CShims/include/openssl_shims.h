#pragma once
#include <stddef.h>
#include <openssl/bio.h>
#include <openssl/evp.h>

/// OPENSSL_VERSION_NUMBER is a macro.
unsigned long pg_shim_openssl_version_number(void);

/// `EVP_EC_gen(curve)` is a macro over the variadic `EVP_PKEY_Q_keygen`.
/// Returns a new EC key on the named curve (e.g. "P-256"), or NULL.
EVP_PKEY *pg_shim_EVP_EC_gen(const char *curve);

/// `BIO_get_mem_data(bio, &data)` is a macro over `BIO_ctrl`. Returns the number
/// of bytes in a memory BIO and points `*data` at them (owned by the BIO).
long pg_shim_BIO_get_mem_data(BIO *bio, char **data);

/// An EC public key from an encoded point (SEC 1: 0x04 || X || Y) on the named
/// group (e.g. "prime256v1"), built with `EVP_PKEY_fromdata`. The OSSL_PARAM array
/// holds pointers to its arguments, so it is built and used in C, in one call.
/// Returns a new key, or NULL if the point does not decode onto the group.
EVP_PKEY *pg_shim_ec_public_key_from_point(const char *group, const unsigned char *point, size_t length);
