/* Base64 as a secret's filter looks for it: see base64.h. */
#include "base/base64.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/banned.h"

char *base64_core(const char *value, size_t len, int r)
{
	size_t n = (size_t)r + len, j0 = (8 * (size_t)r + 5) / 6, j1 = 8 * n / 6;
	unsigned char *in, *enc;
	char *core;

	if (len < BASE64_CORE_MIN)
		return NULL;
	in = xcalloc(n + 3, 1);
	memcpy(in + r, value, len);
	enc = xmalloc((n + 3) / 3 * 4 + 1);
	EVP_EncodeBlock(enc, in, (int)((n + 2) / 3 * 3));
	core = xmalloc(j1 - j0 + 1);
	memcpy(core, enc + j0, j1 - j0);
	core[j1 - j0] = '\0';
	OPENSSL_cleanse(in, n + 3);
	OPENSSL_cleanse(enc, (n + 3) / 3 * 4 + 1);
	free(in);
	free(enc);
	return core;
}

int base64_url(char *s)
{
	int changed = 0;

	for (; *s; s++)
		if (*s == '+' || *s == '/') {
			*s = *s == '+' ? '-' : '_';
			changed = 1;
		}
	return changed;
}
