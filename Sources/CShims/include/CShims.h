// Fixed-argument wrappers for C macros and variadic functions that Swift cannot
// import. Every name is prefixed `pg_shim_`; one header per library.
#pragma once
#include "openssl_shims.h"
#include "mhd_shims.h"
#include "system_shims.h"
#include "tls_shims.h"
#include "x509_shims.h"
