/*
 * The task's own certificate authority, for the proxy's TLS interception
 * (docs/proxy.md, "Interception"): an ECDSA P-256 key made in memory, never
 * written anywhere, and a self-signed CA certificate whose X.509 name
 * constraints permit only the intercepted hosts and whose validity ends
 * with the task.  The VM trusts the certificate; the proxy signs with the
 * key a certificate for each intercepted host it serves.
 */
#ifndef AIBOX_TASK_CA_H
#define AIBOX_TASK_CA_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct buf;

struct task_ca {
	EVP_PKEY *key;      /* the CA's */
	X509 *cert;         /* the CA's certificate */
	EVP_PKEY *leaf_key; /* the one key of every host certificate it issues */
	long not_after;     /* seconds since the epoch: when both stop being valid */
};

/*
 * Make a CA for hosts (allow entries: "example.com", "example.com:8443",
 * "*.example.com", an IPv4 address or a bracketed IPv6 one; the port is
 * dropped), valid from a minute ago for valid_s seconds (1 up to 30 days).
 * Its name constraints permit DNS:NAME for a name (NAME and, OpenSSL's rule,
 * its subdomains), DNS:.DOMAIN for "*.DOMAIN", and IP:ADDR/full mask for an
 * address; nothing else.  0, or -EINVAL/-ENOMEM with the reason in err.
 */
int task_ca_make(struct task_ca *ca, const char *const *hosts, size_t n, long valid_s,
                 struct buf *err);

/* The CA's certificate in PEM, appended to out. */
void task_ca_pem(const struct task_ca *ca, struct buf *out);

/*
 * A certificate for host (a name, or an IP literal without brackets)
 * signed by ca, with ca->leaf_key, for serverAuth, valid until the CA's
 * end.  It names host whether the constraints permit it or not: the caller
 * issues only for the hosts the CA was made for.  NULL with err set.
 */
X509 *task_ca_issue(const struct task_ca *ca, const char *host, struct buf *err);

/* Free the keys and certificate; safe on a zeroed or released ca. */
void task_ca_release(struct task_ca *ca);

#endif
