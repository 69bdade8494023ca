#include "openssl_shims.h"
#include <openssl/opensslv.h>

unsigned long pg_shim_openssl_version_number(void) { return OPENSSL_VERSION_NUMBER; }
