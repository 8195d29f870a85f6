/*
 * The client side of TLS for the proxy's key forwarding (OpenSSL).
 *
 * tls_client_ctx() reads the trusted root certificates into memory at once
 * (not a hashed directory looked up lazily), so that certificates can still
 * be checked after the sandbox lockdown forbids opening files.  Peers are
 * checked fully: chain, validity, and the host name (or IP address).
 */
#ifndef AIBOX_TLS_H
#define AIBOX_TLS_H

#include <openssl/ssl.h>

struct buf;

/*
 * A client context trusting the PEM file ca_file, or the system's bundle
 * (OpenSSL's default cert file, SSL_CERT_FILE) when NULL.  TLS 1.2 at least,
 * peer verification on.  NULL with a message in err.
 */
SSL_CTX *tls_client_ctx(const char *ca_file, struct buf *err);

/*
 * A connection on the connected, non-blocking socket fd to host (a name,
 * checked against the certificate and sent as SNI, or an IP literal, checked
 * against the certificate's IP addresses).  NULL on failure.
 */
SSL *tls_client_new(SSL_CTX *ctx, int fd, const char *host);

/* Append the last OpenSSL error as text to err, for messages; the queue is cleared. */
void tls_error(struct buf *err);

#endif
