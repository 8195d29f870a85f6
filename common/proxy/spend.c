#include "proxy/spend.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/banned.h"

int spend_start(struct spend *s, const char *project_dir, uint64_t cap_task, uint64_t cap_day,
                struct buf *err)
{
	struct buf spent = BUF_INIT, cap = BUF_INIT;
	int ret;

	s->cap_task = cap_task;
	s->cap_day = cap_day;
	/* aibox-proxy reads the same table when it starts: a bad one is refused here first. */
	if ((ret = spend_prices_check(err)) < 0)
		return ret;
	s->ledger_fd = usage_ledger_open(project_dir, time(NULL), err);
	if (s->ledger_fd < 0)
		return s->ledger_fd;
	if ((ret = usage_ledger_add(s->ledger_fd, 0, &s->day_nano)) < 0) {
		buf_addf(err, "cannot read the ledger of today's spend in '%s/spend': %s",
		         project_dir, ret == -EINVAL ? "not one number" : strerror(-ret));
		return ret;
	}
	if (cap_day && s->day_nano >= cap_day) {
		usage_format_usd(&spent, s->day_nano);
		usage_format_usd(&cap, cap_day);
		buf_addf(err,
		         "the project's daily budget of %s USD is spent (%s USD today by aibox's "
		         "count): no task or aibox run starts before tomorrow (local time), or "
		         "raise budget.day",
		         cap.buf, spent.buf);
		ret = -EDQUOT;
	}
	buf_release(&spent);
	buf_release(&cap);
	return ret;
}

int spend_prices_check(struct buf *err)
{
	struct usage_prices t = USAGE_PRICES_INIT;
	int ret = usage_prices_load_in_use(&t, err);

	usage_prices_release(&t);
	return ret;
}

uint64_t spend_cap_min(uint64_t a, uint64_t b)
{
	if (!a || (b && b < a))
		return b;
	return a;
}

static void push_usd(struct strvec *args, const char *opt, uint64_t nano)
{
	struct buf b = BUF_INIT;

	/* usage_format_usd() drops digits below 1e-6 USD: round up, never loosen a cap. */
	usage_format_usd(&b, nano % 1000 ? nano - nano % 1000 + 1000 : nano);
	strvec_pushl(args, opt, b.buf, NULL);
	buf_release(&b);
}

void spend_proxy_args(const struct spend *s, struct strvec *args, int fd_num, int user_fd_num)
{
	struct buf fd = BUF_INIT;

	if (s->cap_task)
		push_usd(args, "--budget-task", s->cap_task);
	if (s->cap_day)
		push_usd(args, "--budget-day", s->cap_day);
	if (s->ledger_fd >= 0) {
		buf_addf(&fd, "%d", fd_num);
		strvec_pushl(args, "--ledger-fd", fd.buf, NULL);
	}
	if (s->user_ledger_fd >= 0) {
		push_usd(args, "--budget-user", s->cap_user);
		buf_reset(&fd);
		buf_addf(&fd, "%d", user_fd_num);
		strvec_pushl(args, "--user-ledger-fd", fd.buf, NULL);
	}
	buf_release(&fd);
}

int spend_write_usage(int fd, const struct usage_count *u)
{
	struct buf b = BUF_INIT;
	int ret;

	usage_count_json(u, &b);
	buf_addch(&b, '\n');
	ret = write_all(fd, b.buf, b.len) < 0 ? -errno : 0;
	buf_release(&b);
	return ret;
}

void spend_release(struct spend *s)
{
	if (s->ledger_fd >= 0)
		close(s->ledger_fd);
	s->ledger_fd = -1;
	if (s->user_ledger_fd >= 0)
		close(s->user_ledger_fd);
	s->user_ledger_fd = -1;
}
