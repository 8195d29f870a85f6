/* git on the user's checkout (checkout.h). */
#include <errno.h>
#include <string.h>

#include "git/checkout.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "base/banned.h"

/* checkout_git() without the trim: out ends as git wrote it. */
static int checkout_git_z(const char *checkout, struct buf *out, const char *const *args)
{
	struct spawn sp = SPAWN_INIT;
	int ret;

	strvec_pushl(&sp.args, "git", "-C", checkout, "-c", "core.hooksPath=/dev/null", "-c",
	             "core.fsmonitor=false", NULL);
	strvec_pushv(&sp.args, args);
	sp.err = SPAWN_NULL;
	ret = spawn_capture(&sp, out, 64 * 1024);
	spawn_clear(&sp);
	return ret;
}

int checkout_git(const char *checkout, struct buf *out, const char *const *args)
{
	int ret = checkout_git_z(checkout, out, args);

	buf_rtrim(out);
	return ret;
}

int checkout_start_commit(const char *checkout, const char *from, char commit[OID_HEX_MAX + 1],
                          struct buf *err)
{
	struct buf out = BUF_INIT, rev = BUF_INIT;
	const char *oid;
	size_t l;
	int ret = -EINVAL, shallow, r;

	from = from ? from : "HEAD";
	buf_addf(&rev, "%s^{commit}", from);
	/* One git: "true" or "false" first, then the commit if from names one. */
	r = checkout_git(checkout, &out,
	                 (const char *const[]){"rev-parse", "--is-shallow-repository", "--verify",
	                                       "--quiet", "--end-of-options", rev.buf, NULL});
	l = strcspn(out.buf, "\n");
	shallow = l == 4 && !strncmp(out.buf, "true", 4);
	if (r < 0 || !(shallow || (l == 5 && !strncmp(out.buf, "false", 5)))) {
		buf_addf(err, "cannot run git in '%s'", checkout);
		goto out;
	}
	if (shallow) {
		buf_addf(err,
		         "'%s' is a shallow clone: a task needs the full history (git fetch "
		         "--unshallow)",
		         checkout);
		goto out;
	}
	oid = out.buf[l] == '\n' ? out.buf + l + 1 : NULL;
	if (r != 0 || !oid || !OID_HEX_LEN_OK(strlen(oid)) ||
	    strspn(oid, "0123456789abcdef") != strlen(oid)) {
		buf_addf(err, "--from: '%s' names no commit in '%s'", from, checkout);
		goto out;
	}
	memcpy(commit, oid, strlen(oid) + 1);
	ret = 0;
out:
	buf_release(&out);
	buf_release(&rev);
	return ret;
}

/*
 * The last value of key in `git config -z --get-regexp` output (records
 * "<key>\n<value>\0", or "<key>\0" for a key with no value), into value.
 */
static void config_last(const struct buf *out, const char *key, struct buf *value)
{
	size_t kl = strlen(key);

	for (const char *p = out->buf; p < out->buf + out->len; p += strlen(p) + 1) {
		if (strncmp(p, key, kl) || (p[kl] != '\n' && p[kl] != '\0'))
			continue;
		buf_reset(value);
		if (p[kl] == '\n')
			buf_addstr(value, p + kl + 1);
	}
	buf_rtrim(value);
}

int checkout_identity(const char *checkout, struct buf *name, struct buf *email, struct buf *err)
{
	struct buf out = BUF_INIT, n = BUF_INIT, e = BUF_INIT;
	int ret = -ENOENT;

	/* One git for both; its output is not trimmed (-z records). */
	checkout_git_z(
	    checkout, &out,
	    (const char *const[]){"config", "-z", "--get-regexp", "^user\\.(name|email)$", NULL});
	config_last(&out, "user.name", &n);
	config_last(&out, "user.email", &e);
	if (!n.len) {
		buf_addstr(err, "git has no user.name: set it with git config --global user.name "
		                "'Your Name'");
		goto out;
	}
	if (!e.len) {
		buf_addstr(err, "git has no user.email: set it with git config --global user.email "
		                "you@example.com");
		goto out;
	}
	buf_add(name, n.buf, n.len);
	buf_add(email, e.buf, e.len);
	ret = 0;
out:
	buf_release(&out);
	buf_release(&n);
	buf_release(&e);
	return ret;
}
