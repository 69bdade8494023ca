#pragma once
#include <openssl/evp.h>

/// OPENSSL_VERSION_NUMBER is a macro.
unsigned long pg_shim_openssl_version_number(void);
