/*
 * libFuzzer target: the push command list and pkt-line parsers on any bytes,
 * and the receive-pack advertisement's rewrite: what it leaves never names
 * push-options (caps_have()) and is never longer than what it replaced.
 */
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "base/err.h"
#include "git/gitproto.h"
#include "base/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct push_commands pc = PUSH_COMMANDS_INIT;
	enum pkt_kind kind;
	const char *p;
	size_t n;

	if (push_commands_parse(&pc, (const char *)data, size) == 0) {
		for (size_t i = 0; i < pc.nr; i++) {
			(void)refname_ok(pc.cmds[i].ref);
			(void)branch_pattern_match("aibox/*", pc.cmds[i].ref);
		}
		(void)caps_have(pc.caps, "report-status");
	}
	push_commands_release(&pc);
	if (pkt_parse((const char *)data, size, &kind, &p, &n) > 0 && kind == PKT_DATA) {
		char oid[OID_HEX_MAX + 1];
		const char *name;
		size_t nlen;

		/* The broker's check of a push reads each ref line so. */
		if (advert_ref_parse(p, n, oid, &name, &nlen) == 0 &&
		    (!oid_hex_valid(oid, strlen(oid)) || !nlen || name < p || name + nlen > p + n ||
		     memchr(name, '\0', nlen)))
			BUG("advert_ref_parse() gave what is not in the line");
	}
	{
		size_t at = 0, len = 0;

		if (advert_find_caps((const char *)data, size, "git-receive-pack", &at, &len) ==
		    1) {
			struct buf line = BUF_INIT;
			const char *nul;

			advert_caps_rewrite((const char *)data + at + 4, len - 4, "push-options",
			                    &line);
			if (line.len > len)
				BUG("the rewritten line grew");
			nul = memchr(line.buf + 4, '\0', line.len - 4);
			if (nul && caps_have(nul + 1, "push-options"))
				BUG("push-options left in the advertisement");
			buf_release(&line);
		}
	}
	return 0;
}
