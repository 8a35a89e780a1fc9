#ifndef PARLEY_COPENSSL_SHIM_H
#define PARLEY_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <openssl/bn.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <openssl/core_names.h>

/* OpenSSL exposes these as function-like macros, which Swift cannot call. */
static inline long parley_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long parley_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long parley_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
static inline long parley_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *ctx, int (*cb)(SSL *, int *, void *)) {
    return SSL_CTX_set_tlsext_servername_callback(ctx, cb);
}
static inline long parley_SSL_CTX_set_tlsext_servername_arg(SSL_CTX *ctx, void *arg) {
    return SSL_CTX_set_tlsext_servername_arg(ctx, arg);
}
static inline long parley_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
/* SSL_OP_* are built with SSL_OP_BIT, which Swift does not import. */
static inline uint64_t parley_server_options(void) {
    return SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION;
}
/* Session-ticket key callback helpers: AES-256-CBC for the ticket, HMAC-SHA256 over it. */
static inline int parley_ticket_cipher_init(EVP_CIPHER_CTX *ctx, const unsigned char *key, const unsigned char *iv, int enc) {
    return enc ? EVP_EncryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, iv)
               : EVP_DecryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, key, iv);
}
static inline int parley_ticket_mac_init(EVP_MAC_CTX *ctx, const unsigned char *key, size_t length) {
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)key, length);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(ctx, params);
}
/* EVP_PKEY_PUBLIC_KEY is a macro expression Swift does not import. */
static inline int parley_EVP_PKEY_PUBLIC_KEY(void) {
    return EVP_PKEY_PUBLIC_KEY;
}
#endif
