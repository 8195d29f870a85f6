#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/out.h"
#include "task/task_session.h"
#include "base/guest_abi.h"
#include "base/log_cap.h"
#include "base/banned.h"

struct ctx {
	struct task_session *s;
	struct tar_in tar;
	size_t log_len;      /* vm lines written to log_fd */
	int log_full;        /* log_fd got its last line */
	struct task_err err; /* err_fd */
};

static int on_stdout(void *arg, const char *data, size_t n)
{
	struct ctx *c = arg;

	return tar_in_feed(&c->tar, data, n);
}

/*
 * The vm line vm (formatted) to the file fd, which has so_far bytes of its
 * cap taken: the line that would take it past LOG_CAP_BYTES
 * (common/base/log_cap.h) is replaced by the aibox line full, and nothing
 * follows it (*is_full).
 */
static void capped_line(int fd, size_t so_far, int *is_full, const char *id, const struct buf *vm,
                        const char *full)
{
	const size_t max = (size_t)LOG_CAP_BYTES;

	if (*is_full)
		return;
	if (so_far > max || vm->len > max - so_far) {
		struct buf b = BUF_INIT;

		*is_full = 1;
		out_format(&b, time(NULL), "aibox", id, full, strlen(full));
		write_all(fd, b.buf, b.len);
		buf_release(&b);
		return;
	}
	/* A disk that is full must not stop the task: the line is lost. */
	write_all(fd, vm->buf, vm->len);
}

/* What e's file has taken of its cap: its growth since e->base. */
static size_t err_taken(const struct task_err *e)
{
	struct stat st;

	if (fstat(e->fd, &st) < 0)
		return SIZE_MAX; /* cannot tell: as full */
	return st.st_size > e->base ? (size_t)(st.st_size - e->base) : 0;
}

void task_err_init(struct task_err *e, int fd, long long base)
{
	struct stat st;

	e->fd = fd;
	e->full = 0;
	e->file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	e->base = base >= 0 ? (off_t)base : e->file ? st.st_size : 0;
}

void task_err_line(struct task_err *e, const char *id, const char *line, size_t n,
                   const struct buf *vm)
{
	struct buf own = BUF_INIT;

	/* A terminal that went away must not stop the task: the line is lost. */
	if (!e->file) {
		out_write(e->fd, "vm", id, line, n);
		return;
	}
	if (!vm) {
		out_format(&own, time(NULL), "vm", id, line, n);
		vm = &own;
	}
	capped_line(e->fd, err_taken(e), &e->full, id, vm,
	            "the VM's lines past " LOG_CAP_MIB_TEXT
	            " are left out of this output (a file)");
	buf_release(&own);
}

static void on_stderr_line(void *arg, const char *line, size_t n)
{
	struct ctx *c = arg;
	struct buf vm = BUF_INIT;

	/* Formatted once for the files; a terminal's is cut to its width. */
	if (c->err.file || c->s->log_fd > 2)
		out_format(&vm, time(NULL), "vm", c->s->id, line, n);
	task_err_line(&c->err, c->s->id, line, n, c->err.file ? &vm : NULL);
	if (c->s->log_fd > 2) {
		capped_line(c->s->log_fd, c->log_len, &c->log_full, c->s->id, &vm,
		            TASK_LOG_FULL_TEXT);
		if (!c->log_full)
			c->log_len += vm.len;
	}
	buf_release(&vm);
}

int task_session_run(struct task_session *s)
{
	struct ssh_client cl = SSH_CLIENT_INIT;
	struct ssh_exec x = {0};
	struct ctx c = {.s = s};
	int ret;

	s->exit_status = -1;
	buf_init(&s->err, 0);
	for (int i = 0; i < RESULT_NFILES; i++) {
		memset(&s->files[i], 0, sizeof(s->files[i]));
		s->files[i].name = guest_results[i].name;
		s->files[i].max = guest_results[i].max;
		s->files[i].fd = s->result_fds[i];
		s->files[i].last = i == RESULT_JSON;
	}
	tar_in_init(&c.tar, s->files, RESULT_NFILES);
	task_err_init(&c.err, s->err_fd, s->err_base);

	cl.fd = s->fd;
	cl.user = s->user;
	cl.host_key = (const unsigned char *)s->keys->host_blob.buf;
	cl.host_key_len = s->keys->host_blob.len;
	cl.user_key = s->keys->user_key.buf;
	cl.user_key_len = s->keys->user_key.len;
	cl.timeout_ms = s->timeout_ms;
	cl.idle_ms = s->idle_ms;
	cl.disk_fd = s->disk_fd;
	cl.disk_name = s->disk_name;
	cl.stop_fd = s->stop_fd;
	x.command = GUEST_CMD_TASK;
	x.in = s->secrets;
	x.in_len = s->secrets_len;
	x.on_stdout = on_stdout;
	x.on_stderr_line = on_stderr_line;
	x.ctx = &c;

	ret = ssh_connect(&cl);
	if (!ret)
		ret = ssh_exec(&cl, &x);
	if (ret < 0) {
		/* A refusal of the tar says more than "stopped by the caller". */
		buf_addstr(&s->err, c.tar.err.len ? c.tar.err.buf : cl.err.buf);
		goto out;
	}
	s->exit_status = x.exit_status;
	if ((ret = tar_in_finish(&c.tar)) < 0) {
		buf_addstr(&s->err, c.tar.err.buf);
		goto out;
	}
	if (x.exit_status != 0) {
		ret = -ECHILD;
		if (x.exit_signal[0])
			buf_addf(&s->err, "the task command in the VM ended by SIG%s",
			         x.exit_signal);
		else
			buf_addf(&s->err, "the task command in the VM exited with %d",
			         x.exit_status);
	}
out:
	s->times = cl.times;
	ssh_close(&cl);
	tar_in_clear(&c.tar);
	return ret;
}

void task_session_clear(struct task_session *s)
{
	buf_release(&s->err);
}

struct node_relay {
	struct task_err err;
	const char *id;
	char prefix[32]; /* " vm[id]: ": a VM's line as the node's out_format() makes it */
	size_t plen;
};

/* One line of the node's stderr, in the relay's worker. */
static void node_line(void *ctx, const char *s, size_t n)
{
	struct node_relay *nr = ctx;
	struct buf clean = BUF_INIT;

	/* "HH:MM:SS vm[id]: text" */
	if (n >= 8 + nr->plen && !memcmp(s + 8, nr->prefix, nr->plen)) {
		task_err_line(&nr->err, nr->id, s + 8 + nr->plen, n - 8 - nr->plen, NULL);
		return;
	}
	/* the node's own lines, srun's: clean, as they came */
	out_sanitize(&clean, s, n);
	buf_addch(&clean, '\n');
	write_all(nr->err.fd, clean.buf, clean.len);
	buf_release(&clean);
}

int task_node_relay_start(struct out_relay *r, int fd, long long base, const char *id)
{
	struct node_relay nr = {.id = id};

	task_err_init(&nr.err, fd, base);
	snprintf(nr.prefix, sizeof(nr.prefix), " vm[%s]: ", id);
	nr.plen = strlen(nr.prefix);
	return out_relay_start_fn(r, fd, TASK_NODE_LINE_MAX, node_line, &nr);
}
