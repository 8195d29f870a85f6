/* The VM's shares, planned once (shares.h). */
#include <stdlib.h>

#include "task/claude_share.h"
#include "config/config.h"
#include "base/err.h"
#include "task/shares.h"

#include "base/guest_abi.h"
#include "task/task_settings.h"
#include "vm/vm.h"
#include "base/banned.h"

static void add(struct shares *s, const char *host, const char *guest, const char *tag,
                int writable)
{
	struct vm_mount *m;

	s->vm = xrealloc(s->vm, (s->nr + 1) * sizeof(*s->vm));
	m = &s->vm[s->nr++];
	m->host_path = strvec_push(&s->strs, host);
	m->tag = strvec_push(&s->strs, tag);
	m->writable = writable;
	if (writable)
		return;
	s->settings = xrealloc(s->settings, (s->nr_settings + 1) * sizeof(*s->settings));
	s->settings[s->nr_settings].tag = m->tag;
	s->settings[s->nr_settings++].path = strvec_push(&s->strs, guest);
}

int shares_plan(struct shares *s, const struct config *cfg, const char *home, struct buf *err)
{
	struct claude_shares cs = CLAUDE_SHARES_INIT;
	char tag[GUEST_TAG_MAX + 1];
	int ret;

	if ((ret = claude_shares_plan(cfg, home, &cs, err)) < 0)
		return ret;
	for (size_t i = 0; i < cfg->nr_mounts; i++) {
		guest_mount_tag(tag, i);
		add(s, cfg->mounts[i].host, cfg->mounts[i].vm, tag, 0);
	}
	for (size_t i = 0; i < cs.nr; i++)
		add(s, cs.v[i].host, cs.v[i].guest, cs.v[i].tag, 0);
	claude_shares_release(&cs);
	return 0;
}

void shares_add_writable(struct shares *s, const char *host, const char *tag)
{
	add(s, host, NULL, tag, 1);
}

void shares_release(struct shares *s)
{
	free(s->vm);
	free(s->settings);
	strvec_clear(&s->strs);
	*s = (struct shares)SHARES_INIT;
}
