#include "x509_shims.h"
#include <openssl/bn.h>
#include <openssl/x509v3.h>

static int set_serial(X509 *certificate, uint64_t serial) {
    BIGNUM *number = BN_new();
    if (number == NULL) return 0;
    int ok = BN_set_word(number, (BN_ULONG)serial) == 1;
    ASN1_INTEGER *integer = ok ? BN_to_ASN1_INTEGER(number, NULL) : NULL;
    ok = integer != NULL && X509_set_serialNumber(certificate, integer) == 1;
    ASN1_INTEGER_free(integer);
    BN_free(number);
    return ok;
}

X509 *pg_shim_x509_issue(EVP_PKEY *subject_key, const char *common_name, X509 *issuer, EVP_PKEY *issuer_key,
                         uint64_t serial, long not_before_offset, long not_after_offset,
                         const char *const *extensions, size_t extension_count) {
    X509 *certificate = X509_new();
    if (certificate == NULL) return NULL;
    X509_NAME *name = X509_get_subject_name(certificate);
    int ok = X509_set_version(certificate, 2) == 1  // v3
        && set_serial(certificate, serial)
        && X509_gmtime_adj(X509_getm_notBefore(certificate), not_before_offset) != NULL
        && X509_gmtime_adj(X509_getm_notAfter(certificate), not_after_offset) != NULL
        && X509_set_pubkey(certificate, subject_key) == 1
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)common_name, -1, -1, 0) == 1
        && X509_set_issuer_name(certificate, issuer != NULL ? X509_get_subject_name(issuer) : name) == 1;
    if (ok) {
        X509V3_CTX context;
        X509V3_set_ctx(&context, issuer != NULL ? issuer : certificate, certificate, NULL, NULL, 0);
        for (size_t index = 0; ok && index < extension_count; index++) {
            X509_EXTENSION *extension =
                X509V3_EXT_nconf(NULL, &context, extensions[2 * index], extensions[2 * index + 1]);
            ok = extension != NULL && X509_add_ext(certificate, extension, -1) == 1;
            X509_EXTENSION_free(extension);
        }
    }
    ok = ok && X509_sign(certificate, issuer_key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}
