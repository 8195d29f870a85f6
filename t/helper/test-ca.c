/*
 * test-ca: the task's CA (common/net/task_ca.h), for t/3008-task-ca.bats.
 *
 *   test-ca DIR VALID_S ENTRY... [-- HOST...]
 *	task_ca_make() for the allow entries, its certificate written to
 *	DIR/ca.pem, and for each HOST a certificate task_ca_issue() signs
 *	(whether the constraints permit it or not) to DIR/HOST.pem;
 *	"error: REASON" (exit 1) when refused
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "base/buf.h"
#include "base/err.h"
#include "net/task_ca.h"
#include "base/banned.h"

int main(int argc, char **argv)
{
	struct task_ca ca;
	struct buf err = BUF_INIT, path = BUF_INIT, pem = BUF_INIT;
	int n = 3, ret = 0;
	FILE *f;

	tool_init(argc, argv);
	if (argc < 3)
		die("usage: test-ca DIR VALID_S ENTRY... [-- HOST...]");
	while (n < argc && strcmp(argv[n], "--"))
		n++;
	if (task_ca_make(&ca, (const char *const *)argv + 3, (size_t)(n - 3), atol(argv[2]), &err) <
	    0) {
		printf("error: %s\n", err.buf);
		buf_release(&err);
		return 1;
	}
	task_ca_pem(&ca, &pem);
	buf_addf(&path, "%s/ca.pem", argv[1]);
	if (!(f = fopen(path.buf, "w")) || fwrite(pem.buf, 1, pem.len, f) != pem.len || fclose(f))
		die("cannot write '%s'", path.buf);
	for (int i = n + 1; i < argc; i++) {
		X509 *c = task_ca_issue(&ca, argv[i], &err);

		if (!c) {
			printf("error: %s\n", err.buf);
			ret = 1;
			continue;
		}
		buf_reset(&path);
		buf_addf(&path, "%s/%s.pem", argv[1], argv[i]);
		if (!(f = fopen(path.buf, "w")) || !PEM_write_X509(f, c) || fclose(f))
			die("cannot write '%s'", path.buf);
		X509_free(c);
	}
	task_ca_release(&ca);
	buf_release(&err);
	buf_release(&path);
	buf_release(&pem);
	return ret;
}
