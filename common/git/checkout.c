/* git on the user's checkout (checkout.h). */
#include <errno.h>
#include <string.h>

#include "git/checkout.h"
#include "base/spawn.h"
#include "base/strvec.h"
#include "base/banned.h"

int checkout_git(const char *checkout, struct buf *out, const char *const *args)
{
	struct spawn sp = SPAWN_INIT;
	int ret;

	strvec_pushl(&sp.args, "git", "-C", checkout, "-c", "core.hooksPath=/dev/null", "-c",
	             "core.fsmonitor=false", NULL);
	strvec_pushv(&sp.args, args);
	sp.err = SPAWN_NULL;
	ret = spawn_capture(&sp, out, 64 * 1024);
	spawn_clear(&sp);
	buf_rtrim(out);
	return ret;
}

int checkout_start_commit(const char *checkout, const char *from, char commit[OID_HEX_MAX + 1],
                          struct buf *err)
{
	struct buf out = BUF_INIT, rev = BUF_INIT;
	int ret = -EINVAL;

	from = from ? from : "HEAD";
	if (checkout_git(checkout, &out,
	                 (const char *const[]){"rev-parse", "--is-shallow-repository", NULL}) !=
	    0) {
		buf_addf(err, "cannot run git in '%s'", checkout);
		goto out;
	}
	if (!strcmp(out.buf, "true")) {
		buf_addf(err,
		         "'%s' is a shallow clone: a task needs the full history (git fetch "
		         "--unshallow)",
		         checkout);
		goto out;
	}
	buf_reset(&out);
	buf_addf(&rev, "%s^{commit}", from);
	if (checkout_git(checkout, &out,
	                 (const char *const[]){"rev-parse", "--verify", "--quiet",
	                                       "--end-of-options", rev.buf, NULL}) != 0 ||
	    !OID_HEX_LEN_OK(out.len)) {
		buf_addf(err, "--from: '%s' names no commit in '%s'", from, checkout);
		goto out;
	}
	memcpy(commit, out.buf, out.len + 1);
	ret = 0;
out:
	buf_release(&out);
	buf_release(&rev);
	return ret;
}

int checkout_identity(const char *checkout, struct buf *name, struct buf *email, struct buf *err)
{
	if (checkout_git(checkout, name, (const char *const[]){"config", "user.name", NULL}) != 0 ||
	    !name->len) {
		buf_addstr(err, "git has no user.name: set it with git config --global user.name "
		                "'Your Name'");
		return -ENOENT;
	}
	if (checkout_git(checkout, email, (const char *const[]){"config", "user.email", NULL}) !=
	        0 ||
	    !email->len) {
		buf_addstr(err, "git has no user.email: set it with git config --global user.email "
		                "you@example.com");
		return -ENOENT;
	}
	return 0;
}
