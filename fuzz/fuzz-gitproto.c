/* libFuzzer target: the push command list and pkt-line parsers on any bytes. */
#include <stddef.h>
#include <stdint.h>

#include "gitproto.h"
#include "banned.h"

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
	(void)pkt_parse((const char *)data, size, &kind, &p, &n);
	return 0;
}
