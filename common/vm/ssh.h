/*
 * The host's side of the task's SSH session (docs/internals.md, "The SSH
 * session"), with libssh2, over a stream socket the caller already has (the
 * VM launcher's private channel, or a socketpair in tests).
 *
 * The guest is untrusted and may die without the host ever seeing EOF, so
 * every wait is bounded: an overall deadline and an idle timeout (no byte at
 * all from the server for that long, keepalives included).  The client waits
 * for the server's banner before it sends anything (a leftover server on the
 * channel would eat a new client's first bytes otherwise; docs/internals.md,
 * "Facts"), offers one key exchange (SSH_KEX_ALGORITHM), insists on a P-256
 * host key (SSH_HOST_KEY_ALGORITHM) and compares its raw blob with the pinned
 * one before it authenticates, and authenticates with a P-256 ECDSA key held
 * in memory (the caller may have locked itself down and cannot open files).
 *
 *	struct ssh_client c = SSH_CLIENT_INIT;
 *	c.fd = fd; c.host_key = ...; c.user_key = ...; c.timeout_ms = ...;
 *	if (ssh_connect(&c) < 0) say c.err.buf;
 *	struct ssh_exec x = { .command = "task", .in = ..., .on_stdout = ..., ... };
 *	if (ssh_exec(&c, &x) < 0) say c.err.buf; else x.exit_status ...
 *	ssh_close(&c);
 *
 * Functions return 0 or a negative errno and leave a message in c->err (the
 * reason of the latest failure, replacing any before it):
 * -ETIMEDOUT (deadline or idle timeout), -EPERM (host key refused), -EACCES
 * (authentication refused), -ECONNRESET (the server went away), -EPROTO (any
 * other SSH failure), or the error a callback returned.
 */
#ifndef AIBOX_SSH_H
#define AIBOX_SSH_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/*
 * The only algorithms the session takes, and the only ones the guest's sshd
 * offers and accepts (image/setup-rootfs, sshd_config): the host key's and
 * the user key's, and the key exchange (docs/security.md, "The SSH
 * algorithms").
 */
#define SSH_HOST_KEY_ALGORITHM "ecdsa-sha2-nistp256"
#define SSH_KEX_ALGORITHM      "ecdh-sha2-nistp256"

#define SSH_DISK_QUIET_MS   3000
#define SSH_DISK_FULL_BYTES (8ULL << 20)

/*
 * When a session got to each point, in monotonic ms (clock_ms()); 0 where it
 * did not get there.  ssh_connect() sets the first three, ssh_exec() the
 * rest: the server's banner seen, the key exchange done (the host key
 * checked), the key accepted; the command's start answered (the channel
 * open and the server has forked it), its output and error output ended,
 * the channel closed.
 */
struct ssh_times {
	int64_t banner, kex, auth;
	int64_t started, ended, closed;
};

struct ssh_client {
	int fd;                        /* connected stream socket; not closed by us */
	const char *user;              /* default "root" */
	const unsigned char *host_key; /* the pinned raw P-256 host key blob */
	size_t host_key_len;
	const char *user_key; /* P-256 ECDSA private key, PEM (SEC1), no passphrase */
	size_t user_key_len;
	long timeout_ms; /* overall, from ssh_connect() on; 0: none */
	long idle_ms;    /* longest silence from the server; 0: none */
	/*
	 * A folder on the filesystem the VM's disk grows in, or -1 (none).
	 * QEMU pauses the VM when a write to its disk fails for lack of
	 * space, and the VM then says nothing: once the server has been
	 * silent SSH_DISK_QUIET_MS, the session ends with -ENOSPC, saying
	 * that disk_name's disk is full, as soon as less than
	 * SSH_DISK_FULL_BYTES are free there (checked every second).
	 */
	int disk_fd;
	const char *disk_name;
	/* Readable when the session must end (-ECANCELED, "stopped"), or -1. */
	int stop_fd;

	struct buf err;
	struct ssh_times times; /* set as the session gets there */

	/* Private. */
	void *session;
	int64_t deadline;   /* monotonic ms, or 0 */
	int64_t last_recv;  /* monotonic ms of the last byte from the server */
	uint64_t received;  /* bytes read off the socket */
	uint64_t delivered; /* the channel's output and error output read */
	int flooded;        /* received outgrew delivered (ssh.c, SSH_UNREAD_MAX) */
	int unread_free;    /* 1: not bounded (an interactive session, ssh_interactive()) */
};

#define SSH_CLIENT_INIT                                                                            \
	{                                                                                          \
		.fd = -1, .disk_fd = -1, .stop_fd = -1, .err = BUF_INIT                            \
	}

/*
 * What to run.  stdin gets `in` and then EOF.  stdout bytes go to on_stdout
 * as they come; a negative return from it stops everything and is returned
 * (the caller's message in its own state, c->err says "stopped by the
 * caller"; the error output already received is passed on first).  stderr
 * goes to on_stderr_line one line at a time, without the
 * newline, as struct out_lines (common/base/out.h) hands lines on: lines
 * longer than SSH_LINE_MAX come in pieces of at most that size, each cut at
 * a character boundary (the newline, or "\r\n", that ends a line after a
 * piece, in whatever read it comes or at the end, adds no empty line), and a
 * last line without a newline comes at the end, however the session ends (a
 * failure too).
 */
#define SSH_LINE_MAX 4096

struct ssh_exec {
	const char *command;
	const void *in;
	size_t in_len;
	int (*on_stdout)(void *ctx, const char *data, size_t n);
	void (*on_stderr_line)(void *ctx, const char *line, size_t n);
	void *ctx;

	/* Set by ssh_exec() when it returns 0. */
	int exit_status;      /* 0-255, or 128 + signal number, or -1 if none came */
	char exit_signal[32]; /* the signal's name ("KILL") if one ended it */
	uint64_t out_bytes;   /* stdout bytes received */
	uint64_t err_bytes;   /* stderr bytes received */
};

/*
 * An interactive command (aibox run): local fds pumped both ways until the
 * command exits.  With term set, the channel gets a pty of cols x rows with
 * TERM=term (the remote program sees a terminal; Ctrl-C and the like are
 * bytes that the guest's pty turns into signals), and the remote stderr
 * comes through the pty too.  Without term: plain pipes, stdin's EOF is
 * passed on, remote stderr goes to err_fd.  env[] ("NAME=value" strings)
 * are sent with setenv requests before the command starts (the server must
 * accept them: sshd's AcceptEnv).
 *
 * resize_fd, when >= 0, is readable when the window size changed: it is
 * drained (read until EAGAIN; make it non-blocking) and get_size() is asked
 * for the new size, which goes to the server.  stop_fd, when >= 0, readable
 * means the other end is gone (QEMU's pidfd): -ECONNRESET.
 *
 * The overall timeout (timeout_ms) does not apply here, the idle timeout
 * does when set.  Writes to out_fd and err_fd block (a terminal or pipe
 * that is not read holds the session up).  0 with exit_status set (as for
 * ssh_exec), or a negative errno with c->error set.
 */
struct ssh_interactive {
	const char *command;
	const char *term; /* NULL: no pty */
	unsigned cols, rows;
	const char *const *env; /* NULL-terminated, or NULL */
	int in_fd, out_fd, err_fd;
	int resize_fd;
	int (*get_size)(void *ctx, unsigned *cols, unsigned *rows);
	int stop_fd;
	void *ctx;

	int exit_status;
	char exit_signal[32];
};

int ssh_interactive(struct ssh_client *c, struct ssh_interactive *x);

/* Wait for the banner, handshake, pin the host key, authenticate. */
int ssh_connect(struct ssh_client *c);

/* Run x->command on a new channel until it exits and the channel closes. */
int ssh_exec(struct ssh_client *c, struct ssh_exec *x);

/*
 * End the session and free it, c->err too: read it before.  After a failure
 * (c->err set) it shuts the socket down first (without that, freeing waits on
 * a peer that may be dead); the fd itself stays the caller's to close.  Safe
 * to call twice.
 */
void ssh_close(struct ssh_client *c);

/*
 * Parse an OpenSSH public key line of a P-256 key ("ecdsa-sha2-nistp256
 * AAAA... comment") into its raw blob (what the server sends as its host
 * key).  0, or -EINVAL for any other key type or a malformed line.
 */
int ssh_pubkey_blob(const char *line, size_t len, struct buf *blob);

/*
 * The keys of one task, both P-256 ECDSA, made in this process with
 * OpenSSL (before any lockdown: it draws from the kernel's random source),
 * the private halves in the PEM (SEC1) form: under dir, ssh/ssh_host_ecdsa_key (+ .pub),
 * the guest's host key, and ssh/authorized_keys, the user key's public half after
 * `command="<forced_command>",restrict ` (`restrict,pty ` with pty set: aibox
 * run's session may ask for a terminal).  The user's private key never stays
 * on disk: it is made into user_key and never written.  host_blob gets
 * the host key's raw blob, to pin.  forced_command NULL means
 * GUEST_FORCED_COMMAND (common/base/guest_abi.h).  0, or a negative errno with a message in err.
 */

struct ssh_task_keys {
	struct buf user_key;
	struct buf host_blob;
};

#define SSH_TASK_KEYS_INIT                                                                         \
	{                                                                                          \
		BUF_INIT, BUF_INIT                                                                 \
	}

int ssh_task_keys_make(const char *dir, const char *forced_command, int pty,
                       struct ssh_task_keys *k, struct buf *err);

void ssh_task_keys_release(struct ssh_task_keys *k);

#endif
