/*
 * The host's side of a task's spend (docs/budget.md): before the VM starts,
 * the project's day ledger is opened and a day already spent is refused;
 * aibox-proxy gets the caps and the ledger (it counts, common/config/usage.h); at
 * the end the proxy's count goes into usage.json in the task folder.
 * aibox task and aibox run both go through here.
 */
#ifndef AIBOX_SPEND_H
#define AIBOX_SPEND_H

#include <stdint.h>

#include "base/buf.h"
#include "base/strvec.h"
#include "config/usage.h"

struct spend {
	uint64_t cap_task, cap_day; /* nano-USD, 0: none */
	int ledger_fd;              /* the day's ledger, -1 before spend_start() */
	uint64_t day_nano;          /* the day's total when the task started */
	/* the policy's budget.day (policy_user_day(), common/task/policy.h): -1 and 0 for none */
	int user_ledger_fd;
	uint64_t cap_user;
};

#define SPEND_INIT                                                                                 \
	{                                                                                          \
		0, 0, -1, 0, -1, 0                                                                 \
	}

/*
 * Check the price table in use (spend_prices_check()), then open the
 * project's ledger for today (usage_ledger_open()) and read it.  -EDQUOT
 * when cap_day is set and the day's total has reached it, with the message
 * in err; another negative errno when the table is bad or the ledger cannot
 * be opened or read; 0 otherwise, with s filled.
 */
int spend_start(struct spend *s, const char *project_dir, uint64_t cap_task, uint64_t cap_day,
                struct buf *err);

/*
 * Read the price table aibox-proxy will count with (usage_prices_load_in_use()):
 * 0, or a negative errno with the file, the line and the reason in err.
 */
int spend_prices_check(struct buf *err);

/* The smaller of two caps, 0 meaning none. */
uint64_t spend_cap_min(uint64_t a, uint64_t b);

/*
 * aibox-proxy's options for s: the caps, --ledger-fd fd_num, and with the
 * user's ledger --budget-user and --user-ledger-fd user_fd_num.
 */
void spend_proxy_args(const struct spend *s, struct strvec *args, int fd_num, int user_fd_num);

/* Write u to fd as usage.json (one JSON object and a newline).  0, or a negative errno. */
int spend_write_usage(int fd, const struct usage_count *u);

/* Close the ledgers. */
void spend_release(struct spend *s);

#endif
