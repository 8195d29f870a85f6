/* ~/.claude's skills, agents and commands as read-only shares (claude_share.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "task/claude_share.h"
#include "config/config.h"
#include "base/err.h"
#include "base/banned.h"

static char *buf_take(struct buf *b)
{
	char *s = xstrdup(b->buf ? b->buf : "");

	buf_release(b);
	return s;
}

static int plan_one(const struct config_claude *c, const char *key, const char *home,
                    struct claude_shares *out, struct buf *err)
{
	struct buf host = BUF_INIT, guest = BUF_INIT, tag = BUF_INIT;
	struct claude_share *s;
	struct stat st = {0};

	if (c->kind == CONFIG_CLAUDE_NONE)
		return 0;
	if (c->kind == CONFIG_CLAUDE_PATH)
		buf_addstr(&host, c->path);
	else if (home && *home)
		buf_addf(&host, "%s/.claude/%s", home, key);
	else
		return 0;
	if (stat(host.buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
		int e = errno;

		if (c->kind != CONFIG_CLAUDE_PATH) {
			buf_release(&host);
			return 0;
		}
		if (st.st_mode && !S_ISDIR(st.st_mode))
			e = ENOTDIR;
		buf_addf(err, "%s: '%s' is not a folder", key, host.buf);
		buf_release(&host);
		return e == ENOENT || e == ENOTDIR ? -ENOTDIR : -e;
	}
	buf_addf(&guest, GUEST_HOME "/.claude/%s", key);
	buf_addf(&tag, "aibox.%s", key);
	s = &out->v[out->nr++];
	s->key = key;
	s->host = buf_take(&host);
	s->guest = buf_take(&guest);
	s->tag = buf_take(&tag);
	return 0;
}

int claude_shares_plan(const struct config *cfg, const char *home, struct claude_shares *out,
                       struct buf *err)
{
	int ret;

	out->nr = 0;
	if ((ret = plan_one(&cfg->skills, "skills", home, out, err)) < 0 ||
	    (ret = plan_one(&cfg->agents, "agents", home, out, err)) < 0 ||
	    (ret = plan_one(&cfg->commands, "commands", home, out, err)) < 0) {
		claude_shares_release(out);
		return ret;
	}
	return 0;
}

void claude_shares_release(struct claude_shares *s)
{
	for (size_t i = 0; i < s->nr; i++) {
		free(s->v[i].host);
		free(s->v[i].guest);
		free(s->v[i].tag);
	}
	memset(s, 0, sizeof(*s));
}
