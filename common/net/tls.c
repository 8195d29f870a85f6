#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/banned.h"

SSL_CTX *tls_client_ctx(const char *ca_file, struct buf *err)
{
	SSL_CTX *ctx;
	const char *file = ca_file;

	OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS |
	                     OPENSSL_INIT_LOAD_CONFIG,
	                 NULL);
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		buf_addstr(err, "cannot make a TLS context: ");
		tls_error(err);
		return NULL;
	}
	if (!file) {
		file = getenv(X509_get_default_cert_file_env());
		if (!file || !*file)
			file = X509_get_default_cert_file();
	}
	if (SSL_CTX_load_verify_locations(ctx, file, NULL) != 1) {
		buf_addf(err, "cannot load the certificates in '%s': ", file);
		tls_error(err);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                          SSL_MODE_RELEASE_BUFFERS);
	return ctx;
}

SSL *tls_client_new(SSL_CTX *ctx, int fd, const char *host)
{
	SSL *ssl = SSL_new(ctx);
	unsigned char addr[16];
	int is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;

	if (!ssl)
		return NULL;
	if (!SSL_set_fd(ssl, fd))
		goto fail;
	if (is_ip) {
		X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

		if (X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1)
			goto fail;
	} else {
		if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
			goto fail;
		SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	}
	SSL_set_connect_state(ssl);
	return ssl;
fail:
	SSL_free(ssl);
	return NULL;
}

void tls_error(struct buf *err)
{
	unsigned long e = ERR_get_error();

	if (!e) {
		buf_addstr(err, "unknown TLS error");
		return;
	}
	/* OpenSSL's text is at most 256 bytes, its NUL included. */
	buf_grow(err, 256);
	ERR_error_string_n(e, err->buf + err->len, 256);
	buf_setlen(err, err->len + strlen(err->buf + err->len));
	ERR_clear_error();
}
