/* The task's certificate authority (task_ca.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/task_ca.h"
#include "net/tls.h"
#include "base/banned.h"

#define TASK_CA_MAX_VALID_S (30L * 24 * 3600)

static EVP_PKEY *p256(void)
{
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ex;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ex)
		return 0;
	ok = X509_add_ext(cert, ex, -1);
	X509_EXTENSION_free(ex);
	return ok;
}

static int set_serial(X509 *cert)
{
	unsigned char r[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(r, sizeof(r)) != 1)
		return 0;
	r[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(r, sizeof(r), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
	BN_free(bn);
	return ok;
}

static int bad_host(const char *entry, struct buf *err)
{
	buf_addf(err, "'%.64s' is not a host", entry);
	return -EINVAL;
}

/* One allow entry as a name constraint, appended to nc ("permitted;DNS:x,..."). */
static int constraint(const char *entry, struct buf *nc, struct buf *err)
{
	char host[256];
	const char *end;
	unsigned char a[16];
	size_t n;

	if (entry[0] == '[') {
		end = strchr(entry, ']');
		if (!end || (size_t)(end - entry - 1) >= sizeof(host))
			return bad_host(entry, err);
		memcpy(host, entry + 1, (size_t)(end - entry - 1));
		host[end - entry - 1] = '\0';
		if (inet_pton(AF_INET6, host, a) != 1)
			return bad_host(entry, err);
		buf_addf(nc, "%spermitted;IP:%s/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		         nc->len ? "," : "", host);
		return 0;
	}
	n = strcspn(entry, ":");
	if (!n || n >= sizeof(host) ||
	    strspn(entry, "abcdefghijklmnopqrstuvwxyz0123456789.-*:") != strlen(entry))
		return bad_host(entry, err);
	memcpy(host, entry, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, a) == 1)
		buf_addf(nc, "%spermitted;IP:%s/255.255.255.255", nc->len ? "," : "", host);
	else if (!strncmp(host, "*.", 2) && !strchr(host + 2, '*'))
		buf_addf(nc, "%spermitted;DNS:%s", nc->len ? "," : "", host + 1);
	else if (!strchr(host, '*'))
		buf_addf(nc, "%spermitted;DNS:%s", nc->len ? "," : "", host);
	else
		return bad_host(entry, err);
	return 0;
}

int task_ca_make(struct task_ca *ca, const char *const *hosts, size_t n, long valid_s,
                 struct buf *err)
{
	struct buf nc = BUF_INIT;
	X509_NAME *name;
	int ret = -EINVAL;

	memset(ca, 0, sizeof(*ca));
	if (valid_s < 1 || valid_s > TASK_CA_MAX_VALID_S || !n)
		return buf_refuse(err, -EINVAL, "a task CA needs hosts and 1 s to 30 days");
	buf_addstr(&nc, "critical,");
	{
		struct buf list = BUF_INIT;

		for (size_t i = 0; i < n; i++)
			if ((ret = constraint(hosts[i], &list, err)) < 0) {
				buf_release(&list);
				buf_release(&nc);
				return ret;
			}
		buf_add(&nc, list.buf, list.len);
		buf_release(&list);
	}
	ret = -ENOMEM;
	ca->not_after = (long)time(NULL) + valid_s;
	if (!(ca->key = p256()) || !(ca->leaf_key = p256()) || !(ca->cert = X509_new()))
		goto fail;
	name = X509_get_subject_name(ca->cert);
	if (!X509_set_version(ca->cert, 2) || !set_serial(ca->cert) ||
	    !X509_gmtime_adj(X509_getm_notBefore(ca->cert), -60) ||
	    !X509_time_adj_ex(X509_getm_notAfter(ca->cert), 0, valid_s, NULL) ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"aibox", -1,
	                                -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                                (const unsigned char *)"aibox task CA", -1, -1, 0) ||
	    !X509_set_issuer_name(ca->cert, name) || !X509_set_pubkey(ca->cert, ca->key) ||
	    !add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") ||
	    !add_ext(ca->cert, ca->cert, NID_name_constraints, nc.buf) ||
	    !X509_sign(ca->cert, ca->key, EVP_sha256()))
		goto fail;
	buf_release(&nc);
	return 0;
fail:
	buf_addstr(err, "cannot make the task's CA: ");
	tls_error(err);
	buf_release(&nc);
	task_ca_release(ca);
	return ret;
}

void task_ca_pem(const struct task_ca *ca, struct buf *out)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;

	if (!b || !PEM_write_bio_X509(b, ca->cert))
		BUG("cannot write a certificate to memory");
	n = BIO_get_mem_data(b, &p);
	buf_add(out, p, (size_t)n);
	BIO_free(b);
}

X509 *task_ca_issue(const struct task_ca *ca, const char *host, struct buf *err)
{
	X509 *c = X509_new();
	X509_NAME *name;
	struct buf san = BUF_INIT;
	unsigned char a[16];
	int is_ip = inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;

	if (!c || strlen(host) > 253 || !*host ||
	    strspn(host, "abcdefghijklmnopqrstuvwxyz0123456789.-:") != strlen(host)) {
		X509_free(c);
		buf_addf(err, "cannot issue a certificate for '%.64s'", host);
		return NULL;
	}
	buf_addf(&san, "%s:%s", is_ip ? "IP" : "DNS", host);
	name = X509_get_subject_name(c);
	if (!X509_set_version(c, 2) || !set_serial(c) ||
	    !X509_gmtime_adj(X509_getm_notBefore(c), -60) ||
	    !ASN1_TIME_set(X509_getm_notAfter(c), (time_t)ca->not_after) ||
	    /* An address in CN would be checked against the DNS constraints: SAN only. */
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"aibox", -1,
	                                -1, 0) ||
	    (!is_ip && !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                                           (const unsigned char *)host, -1, -1, 0)) ||
	    !X509_set_issuer_name(c, X509_get_subject_name(ca->cert)) ||
	    !X509_set_pubkey(c, ca->leaf_key) ||
	    !add_ext(c, ca->cert, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(c, ca->cert, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(c, ca->cert, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(c, ca->cert, NID_authority_key_identifier, "keyid:always") ||
	    !add_ext(c, ca->cert, NID_subject_alt_name, san.buf) ||
	    !X509_sign(c, ca->key, EVP_sha256())) {
		buf_addf(err, "cannot issue a certificate for '%s': ", host);
		tls_error(err);
		X509_free(c);
		c = NULL;
	}
	buf_release(&san);
	return c;
}

void task_ca_release(struct task_ca *ca)
{
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	X509_free(ca->cert);
	memset(ca, 0, sizeof(*ca));
}
