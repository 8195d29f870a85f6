#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/out.h"
#include "vm/ssh.h"
#include "base/guest_abi.h"
#include "base/banned.h"

/*
 * The start of a P-256 key's blob (RFC 5656): the strings "ecdsa-sha2-nistp256"
 * and "nistp256", then the point's length, 65; the point follows, uncompressed
 * (0x04, X, Y).
 */
#define P256_BLOB_HEAD "\0\0\0\x13" SSH_HOST_KEY_ALGORITHM "\0\0\0\x08nistp256\0\0\0\x41"

__attribute__((format(printf, 3, 4))) static int fail(struct ssh_client *c, int err,
                                                      const char *fmt, ...)
{
	va_list ap;

	buf_reset(&c->err);
	va_start(ap, fmt);
	buf_vaddf(&c->err, fmt, ap);
	va_end(ap);
	return err;
}

/* A libssh2 failure other than EAGAIN, as our errno and message. */
static int fail_ssh(struct ssh_client *c, int rc, const char *what)
{
	char *msg = NULL;

	if (c->session)
		libssh2_session_last_error(c->session, &msg, NULL, 0);
	if (!msg || !*msg)
		msg = "unknown error";
	if (c->flooded)
		return fail(c, -EPROTO,
		            "the VM's SSH server sent %llu MiB beyond the task's output while %s",
		            (unsigned long long)((c->received - c->delivered) >> 20), what);
	if (rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_RECV ||
	    rc == LIBSSH2_ERROR_SOCKET_SEND)
		return fail(c, -ECONNRESET, "the connection to the VM ended while %s: %s", what,
		            msg);
	return fail(c, -EPROTO, "SSH failed while %s: %s", what, msg);
}

/*
 * libssh2 keeps every message it does not handle itself (an unknown type, a
 * reply nobody asks for) until asked for it, which nothing does: a server
 * that sends them makes the client grow without bound.  What the server sent
 * beyond the channel's output, SSH's own framing included (about 0.2% of a
 * full packet, more for small ones), is allowed SSH_UNREAD_MAX bytes and a
 * sixteenth of the output; past that, reading fails (fail_ssh() says why).
 * Not in an interactive session (ssh_interactive()): a terminal's echo of
 * each key is a packet of a byte, its framing fifty times that, and a long
 * session of them would pass any such bound; its user is there to stop it.
 */
#define SSH_UNREAD_MAX (64ULL << 20)

/* libssh2 reads through here, so that any byte from the server counts as life. */
static LIBSSH2_RECV_FUNC(recv_counted)
{
	struct ssh_client *c = *abstract;
	ssize_t n;

	if (!c->unread_free && c->received > c->delivered + c->delivered / 16 + SSH_UNREAD_MAX) {
		c->flooded = 1;
		return -EPROTO;
	}
	n = recv(socket, buffer, length, flags);
	if (n < 0)
		return -errno;
	if (n > 0) {
		c->last_recv = clock_ms();
		c->received += (uint64_t)n;
	}
	return n;
}

/*
 * The disk the VM's disk grows in (ssh.h): -ENOSPC, said, when the VM has
 * been quiet a while and that disk is full; else 0, *wait cut to a second.
 */
static int disk_check(struct ssh_client *c, int64_t now, int64_t *wait)
{
	struct statvfs st;
	unsigned long long avail;

	if (c->disk_fd < 0)
		return 0;
	if (*wait > 1000)
		*wait = 1000;
	if (now - c->last_recv < SSH_DISK_QUIET_MS || fstatvfs(c->disk_fd, &st) < 0)
		return 0;
	avail = (unsigned long long)st.f_bavail * st.f_frsize;
	if (avail >= SSH_DISK_FULL_BYTES)
		return 0;
	return fail(c, -ENOSPC,
	            "the disk of '%s' is full (%llu KiB free): the VM stopped when its disk "
	            "could not grow; free space there and run the task again",
	            c->disk_name ? c->disk_name : "?", avail >> 10);
}

/*
 * The idle limit (c->idle_ms since the VM last sent anything): -ETIMEDOUT,
 * said, once it has passed; else 0, *wait cut to the time left.  A full
 * disk (disk_check) ends it sooner.
 */
static int idle_check(struct ssh_client *c, int64_t now, int64_t *wait)
{
	int64_t idle_end = c->last_recv + c->idle_ms;

	if (disk_check(c, now, wait) < 0)
		return -ENOSPC;
	if (!c->idle_ms)
		return 0;
	if (now >= idle_end)
		return fail(c, -ETIMEDOUT, "the VM sent nothing for %ld s", c->idle_ms / 1000);
	if (idle_end - now < *wait)
		*wait = idle_end - now;
	return 0;
}

/*
 * Wait until the socket is ready for what libssh2 is blocked on, or until the
 * next keepalive is due.  0 to go on, or -ETIMEDOUT (-ENOSPC: disk_check).
 */
static int wait_socket(struct ssh_client *c, int events, int keepalive_ms)
{
	int64_t now = clock_ms(), wait = keepalive_ms > 0 ? keepalive_ms : 1000;
	struct pollfd pfd[2] = {{.fd = c->fd, .events = (short)events},
	                        {.fd = c->stop_fd, .events = POLLIN}};
	int ret;

	if (c->deadline) {
		if (now >= c->deadline)
			return fail(c, -ETIMEDOUT, "the task's SSH session ran out of time");
		if (c->deadline - now < wait)
			wait = c->deadline - now;
	}
	if ((ret = idle_check(c, now, &wait)) < 0)
		return ret;
	if (poll(pfd, 2, (int)wait) < 0 && errno != EINTR)
		return fail(c, -errno, "cannot poll the SSH channel: %s", strerror(errno));
	if (pfd[1].revents)
		return fail(c, -ECANCELED, "stopped");
	return 0;
}

static int wait_ssh(struct ssh_client *c)
{
	int dir = libssh2_session_block_directions(c->session), ev = 0;

	if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
		ev |= POLLIN;
	if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		ev |= POLLOUT;
	return wait_socket(c, ev ? ev : POLLIN, 0);
}

/*
 * What is left after a libssh2 call that returned rc: 1 to make the call
 * again (it said EAGAIN and the socket is ready now), 0 when it succeeded, or
 * the negative error recorded (the wait failed, or the call failed while
 * what).  The one retry of a non-blocking call:
 *
 *	do
 *		ret = ssh_again(c, libssh2_call(...), "doing it");
 *	while (ret > 0);
 */
static int ssh_again(struct ssh_client *c, int rc, const char *what)
{
	int ret;

	if (rc == LIBSSH2_ERROR_EAGAIN)
		return (ret = wait_ssh(c)) < 0 ? ret : 1;
	return rc ? fail_ssh(c, rc, what) : 0;
}

/* The server speaks first in SSH; we send nothing until it has. */
static int wait_banner(struct ssh_client *c)
{
	char peek[4];
	int ret;

	for (;;) {
		ssize_t n = recv(c->fd, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);

		if (n == sizeof(peek)) {
			if (memcmp(peek, "SSH-", 4))
				return fail(c, -EPROTO,
				            "the VM's SSH server did not start with a banner");
			c->last_recv = clock_ms();
			return 0;
		}
		if (n == 0)
			return fail(c, -ECONNRESET,
			            "the channel to the VM closed before its SSH server spoke");
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return fail(c, -errno, "cannot read the SSH channel: %s", strerror(errno));
		if (n > 0) {
			/* Part of the banner: poll would return at once, so nap. */
			struct timespec ts = {0, 10 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
		if ((ret = wait_socket(c, POLLIN, 0)) < 0)
			return ret;
	}
}

int ssh_connect(struct ssh_client *c)
{
	LIBSSH2_SESSION *s;
	const char *key, *user = c->user ? c->user : "root";
	size_t key_len;
	int type, rc, ret;

	buf_reset(&c->err);
	memset(&c->times, 0, sizeof(c->times));
	c->last_recv = clock_ms();
	c->deadline = c->timeout_ms ? c->last_recv + c->timeout_ms : 0;
	if (libssh2_init(0))
		return fail(c, -ENOMEM, "cannot initialise libssh2");
	if ((ret = wait_banner(c)) < 0)
		return ret;
	c->times.banner = clock_ms();

	s = libssh2_session_init_ex(NULL, NULL, NULL, c);
	if (!s)
		return fail(c, -ENOMEM, "cannot make an SSH session");
	c->session = s;
	libssh2_session_callback_set(s, LIBSSH2_CALLBACK_RECV, (void *)recv_counted);
	libssh2_session_set_blocking(s, 0);
	/* One algorithm each, nothing else accepted (docs/security.md, "The SSH algorithms"). */
	if (libssh2_session_method_pref(s, LIBSSH2_METHOD_HOSTKEY, SSH_HOST_KEY_ALGORITHM))
		return fail_ssh(c, -1, "choosing the host key's algorithm");
	if (libssh2_session_method_pref(s, LIBSSH2_METHOD_KEX, SSH_KEX_ALGORITHM))
		return fail_ssh(c, -1, "choosing the key exchange");

	do
		ret = ssh_again(c, libssh2_session_handshake(s, c->fd), "greeting the VM");
	while (ret > 0);
	if (ret < 0)
		return ret;

	key = libssh2_session_hostkey(s, &key_len, &type);
	if (!key || type != LIBSSH2_HOSTKEY_TYPE_ECDSA_256 || key_len != c->host_key_len ||
	    memcmp(key, c->host_key, key_len))
		return fail(c, -EPERM, "the VM's host key is not the one made for this task");
	c->times.kex = clock_ms();

	while ((rc = libssh2_userauth_publickey_frommemory(s, user, strlen(user), NULL, 0,
	                                                   c->user_key, c->user_key_len, NULL)) ==
	       LIBSSH2_ERROR_EAGAIN)
		if ((ret = wait_ssh(c)) < 0)
			return ret;
	if (rc) {
		if (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED ||
		    rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
			return fail(c, -EACCES, "the VM refused the task's key");
		return fail_ssh(c, rc, "authenticating");
	}
	c->times.auth = clock_ms();
	libssh2_keepalive_config(s, 1, c->idle_ms >= 9000 ? (unsigned)(c->idle_ms / 3000) : 2);
	return 0;
}

/*
 * The caller stopped on the output: the error output that came before it may
 * still wait in libssh2's queue (each loop takes a piece of both streams), and
 * it is what tells why.  Pass on what is there without waiting, at most
 * SSH_DRAIN_MAX bytes (the channel's window bounds it anyway), then the last
 * piece of a line.
 */
#define SSH_DRAIN_MAX (4 << 20)

static void drain_stderr(LIBSSH2_CHANNEL *ch, struct out_lines *lb, char *data, size_t size)
{
	size_t total = 0;
	ssize_t n;

	/* The session is non-blocking: LIBSSH2_ERROR_EAGAIN ends the loop. */
	while (total < SSH_DRAIN_MAX && (n = libssh2_channel_read_stderr(ch, data, size)) > 0) {
		out_lines_feed(lb, data, (size_t)n);
		total += (size_t)n;
	}
	out_lines_end(lb);
}

static int signal_number(const char *name)
{
	for (int i = 1; i < NSIG; i++) {
		const char *abbrev = sigabbrev_np(i);

		if (abbrev && !strcmp(abbrev, name))
			return i;
	}
	return 0;
}

static void exit_of(struct ssh_client *c, LIBSSH2_CHANNEL *ch, struct ssh_exec *x)
{
	char *sig = NULL;
	size_t sig_len = 0;

	x->exit_status = libssh2_channel_get_exit_status(ch);
	x->exit_signal[0] = '\0';
	if (!libssh2_channel_get_exit_signal(ch, &sig, &sig_len, NULL, NULL, NULL, NULL) && sig) {
		snprintf(x->exit_signal, sizeof(x->exit_signal), "%.*s", (int)sig_len, sig);
		/*
		 * The server's bytes, for messages: a signal's name ("KILL",
		 * "NAME@DOMAIN") keeps these, anything else (a line break, or a
		 * U+2028 the output's sanitizer breaks lines at) shows as '?'.
		 */
		for (char *p = x->exit_signal; *p; p++)
			if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			      (*p >= '0' && *p <= '9') || strchr("@._-", *p)))
				*p = '?';
		x->exit_status = 128 + signal_number(x->exit_signal);
		libssh2_free(c->session, sig);
	}
}

/* Open a session channel into *out.  0, or the negative error fail_ssh() recorded. */
static int open_channel(struct ssh_client *c, LIBSSH2_CHANNEL **out)
{
	LIBSSH2_SESSION *s = c->session;
	LIBSSH2_CHANNEL *ch;
	int rc, ret;

	while (!(ch = libssh2_channel_open_session(s))) {
		if ((rc = libssh2_session_last_errno(s)) != LIBSSH2_ERROR_EAGAIN)
			return fail_ssh(c, rc, "opening a channel");
		if ((ret = wait_ssh(c)) < 0)
			return ret;
	}
	*out = ch;
	return 0;
}

/* Close the channel and wait for the server's close.  0 or the negative error recorded. */
static int close_channel(struct ssh_client *c, LIBSSH2_CHANNEL *ch)
{
	int ret;

	do
		ret = ssh_again(c, libssh2_channel_close(ch), "closing the channel");
	while (ret > 0);
	while (!ret &&
	       (ret = ssh_again(c, libssh2_channel_wait_closed(ch), "closing the channel")) > 0)
		;
	return ret;
}

/*
 * Input for a channel: len bytes at buf of which off are written, whether
 * it has ended (no bytes will follow these) and whether the EOF is sent.
 */
struct chan_in {
	const char *buf;
	size_t len, off;
	int ended, eof_sent;
};

/*
 * Write what the channel takes of in's bytes not yet written (at most 32 KiB
 * a turn), then the EOF once in has ended and all is written; *progress when
 * something went.  0, or the negative error recorded, said as writing or
 * ending.
 */
static int chan_write(struct ssh_client *c, LIBSSH2_CHANNEL *ch, struct chan_in *in,
                      const char *writing, const char *ending, int *progress)
{
	ssize_t n;
	int rc;

	if (in->off < in->len) {
		size_t k = in->len - in->off;

		n = libssh2_channel_write(ch, in->buf + in->off, k > 32768 ? 32768 : k);
		if (n > 0) {
			in->off += (size_t)n;
			*progress = 1;
		} else if (n != LIBSSH2_ERROR_EAGAIN) {
			return fail_ssh(c, (int)n, writing);
		}
	}
	if (in->ended && in->off == in->len && !in->eof_sent) {
		rc = libssh2_channel_send_eof(ch);
		if (!rc)
			in->eof_sent = *progress = 1;
		else if (rc != LIBSSH2_ERROR_EAGAIN)
			return fail_ssh(c, rc, ending);
	}
	return 0;
}

/*
 * The end of a turn of a command's loop: 1 when its output and error output
 * ended and the channel is at EOF; else 0 after a keepalive if one was due
 * (the seconds to the next in *next), or the negative error recorded.
 */
static int turn_end(struct ssh_client *c, LIBSSH2_CHANNEL *ch, int out_done, int err_done,
                    int *next)
{
	if (out_done && err_done && libssh2_channel_eof(ch))
		return 1;
	if (libssh2_keepalive_send(c->session, next) < 0)
		return fail_ssh(c, LIBSSH2_ERROR_SOCKET_SEND, "sending a keepalive");
	return 0;
}

/*
 * One read of the channel's stdout (to x->on_stdout) and of its stderr (in
 * lines to x->on_stderr_line); *out_done and *err_done at each one's EOF,
 * *progress when bytes came.  0 or the negative error recorded (the
 * caller's, when on_stdout stopped it).
 */
static int exec_read(struct ssh_client *c, LIBSSH2_CHANNEL *ch, struct ssh_exec *x,
                     struct out_lines *lb, int *out_done, int *err_done, int *progress)
{
	static char data[64 * 1024];
	ssize_t n;
	int ret;

	n = libssh2_channel_read(ch, data, sizeof(data));
	if (n > 0) {
		*progress = 1;
		x->out_bytes += (uint64_t)n;
		c->delivered += (uint64_t)n;
		if (x->on_stdout && (ret = x->on_stdout(x->ctx, data, (size_t)n)) < 0) {
			fail(c, ret, "stopped by the caller");
			drain_stderr(ch, lb, data, sizeof(data));
			return ret;
		}
	} else if (n == 0) {
		*out_done = 1;
	} else if (n != LIBSSH2_ERROR_EAGAIN) {
		return fail_ssh(c, (int)n, "reading the task's output");
	}
	n = libssh2_channel_read_stderr(ch, data, sizeof(data));
	if (n > 0) {
		*progress = 1;
		x->err_bytes += (uint64_t)n;
		c->delivered += (uint64_t)n;
		out_lines_feed(lb, data, (size_t)n);
	} else if (n == 0) {
		*err_done = 1;
	} else if (n != LIBSSH2_ERROR_EAGAIN) {
		return fail_ssh(c, (int)n, "reading the task's progress");
	}
	return 0;
}

int ssh_exec(struct ssh_client *c, struct ssh_exec *x)
{
	LIBSSH2_SESSION *s = c->session;
	LIBSSH2_CHANNEL *ch = NULL;
	struct out_lines lines, *lb = &lines;
	struct chan_in in = {.buf = (const char *)x->in, .len = x->in_len, .ended = 1};
	int ret;

	out_lines_init(lb, SSH_LINE_MAX, x->on_stderr_line, x->ctx);
	x->exit_status = -1;
	x->exit_signal[0] = '\0';
	x->out_bytes = 0;
	x->err_bytes = 0;
	if (!s) {
		ret = fail(c, -ENOTCONN, "no SSH session");
		goto out;
	}
	if ((ret = open_channel(c, &ch)) < 0)
		goto out;
	do
		ret =
		    ssh_again(c, libssh2_channel_exec(ch, x->command), "starting the task command");
	while (ret > 0);
	if (ret < 0)
		goto out;
	c->times.started = clock_ms();

	for (;;) {
		int progress = 0, out_done = 0, err_done = 0, next;

		if ((ret = chan_write(c, ch, &in, "writing the task's input",
		                      "ending the task's input", &progress)) < 0 ||
		    (ret = exec_read(c, ch, x, lb, &out_done, &err_done, &progress)) < 0)
			goto out;
		if ((ret = turn_end(c, ch, out_done, err_done, &next)) < 0)
			goto out;
		if (ret)
			break;
		if (progress)
			continue;
		/*
		 * With nothing to do, the idle and overall limits still need
		 * checking even when libssh2 is not blocked on the socket.
		 */
		if ((ret = wait_socket(c, POLLIN, next > 0 ? next * 1000 : 1000)) < 0)
			goto out;
	}
	c->times.ended = clock_ms();
	out_lines_end(lb);

	if ((ret = close_channel(c, ch)) < 0)
		goto out;
	c->times.closed = clock_ms();
	exit_of(c, ch, x);
	ret = 0;
out:
	/* After a failure the channel goes with the session in ssh_close(). */
	if (ch && ret == 0)
		libssh2_channel_free(ch);
	/* a line the VM had begun, whatever ended the session: its last words say why */
	out_lines_end(lb);
	out_lines_release(lb);
	return ret;
}

void ssh_close(struct ssh_client *c)
{
	if (!c->session) {
		buf_release(&c->err);
		return;
	}
	/*
	 * Freeing a session with an open channel waits for the server to
	 * confirm the channel's close, which a dead or stalled VM never does:
	 * after a failure, end the connection first so that every wait ends.
	 */
	if (c->err.len)
		shutdown(c->fd, SHUT_RDWR);
	else
		libssh2_session_disconnect(c->session, "done");
	libssh2_session_free(c->session);
	c->session = NULL;
	buf_release(&c->err);
}

static int b64_value(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

int ssh_pubkey_blob(const char *line, size_t len, struct buf *blob)
{
	static const char type[] = SSH_HOST_KEY_ALGORITHM " ";
	static const char head[] = P256_BLOB_HEAD "\x04"; /* the point, uncompressed */
	size_t i = sizeof(type) - 1, start;
	unsigned acc = 0;
	int bits = 0, pad = 0;

	if (len < i || memcmp(line, type, i))
		return -EINVAL;
	start = blob->len;
	for (; i < len && line[i] != ' ' && line[i] != '\n'; i++) {
		int v = line[i] == '=' ? 0 : b64_value((unsigned char)line[i]);

		if (v < 0 || (pad && line[i] != '='))
			goto bad;
		if (line[i] == '=') {
			pad++;
			continue;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf_addch(blob, (int)((acc >> bits) & 0xff));
		}
	}
	if (blob->len - start != sizeof(head) - 1 + 64 ||
	    memcmp(blob->buf + start, head, sizeof(head) - 1))
		goto bad;
	return 0;
bad:
	buf_setlen(blob, start);
	return -EINVAL;
}

/*
 * A P-256 key pair, made here with OpenSSL (no ssh-keygen process: two of
 * them were about 20 ms of a task's start).  The private half into pem, in
 * the PEM (SEC1, "EC PRIVATE KEY") form, not OpenSSH's: libssh2 1.10 reads an
 * OpenSSH-form ECDSA key with its own code, which leaks the private number at
 * each read; the PEM form goes through OpenSSL's reader, and sshd reads it as
 * a host key.  The public half into line as OpenSSH writes it:
 * "ecdsa-sha2-nistp256 <base64 of the blob> aibox-task".  0, or -errno with
 * a message in err.
 */
static int p256_pair(struct buf *pem, struct buf *line, struct buf *err)
{
	static const char head[] = P256_BLOB_HEAD;
	unsigned char point[65], blob[sizeof(head) - 1 + sizeof(point)];
	char b64[4 * ((sizeof(blob) + 2) / 3) + 1];
	EVP_PKEY *key = EVP_EC_gen("P-256");
	BIO *bio = NULL;
	BUF_MEM *mem;
	size_t plen = 0;
	int ret = -EIO;

	if (!key) {
		buf_addstr(err, "cannot make a P-256 key");
		goto out;
	}
	if (!EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
	                                     sizeof(point), &plen) ||
	    plen != sizeof(point) || point[0] != 0x04) {
		buf_addstr(err, "cannot read the P-256 key's point");
		goto out;
	}
	bio = BIO_new(BIO_s_secmem());
	if (!bio || !PEM_write_bio_PrivateKey_traditional(bio, key, NULL, NULL, 0, NULL, NULL) ||
	    !BIO_get_mem_ptr(bio, &mem)) {
		buf_addstr(err, "cannot write the P-256 key in the PEM form");
		goto out;
	}
	buf_add(pem, mem->data, mem->length);
	memcpy(blob, head, sizeof(head) - 1);
	memcpy(blob + sizeof(head) - 1, point, sizeof(point));
	EVP_EncodeBlock((unsigned char *)b64, blob, (int)sizeof(blob));
	buf_addf(line, SSH_HOST_KEY_ALGORITHM " %s aibox-task", b64);
	ret = 0;
out:
	BIO_free(bio);
	EVP_PKEY_free(key);
	return ret;
}

int ssh_task_keys_make(const char *dir, const char *forced_command, int pty,
                       struct ssh_task_keys *k, struct buf *err)
{
	struct buf sshdir = BUF_INIT, path = BUF_INIT, pem = BUF_INIT, pub = BUF_INIT,
	           auth = BUF_INIT;
	int ret;

	buf_addf(&sshdir, "%s/" GUEST_SSH_SUBDIR, dir);
	if (mkdir(sshdir.buf, 0700) < 0) {
		ret = -errno;
		buf_addf(err, "cannot make '%s': %s", sshdir.buf, strerror(errno));
		goto out;
	}
	/* The guest's host key: its file for the guest, its public line to pin. */
	if ((ret = p256_pair(&pem, &pub, err)) < 0)
		goto out;
	buf_addf(&path, "%s/" GUEST_SSH_HOST_KEY, sshdir.buf);
	if ((ret = buf_write_file(&pem, path.buf, 0600)) < 0) {
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
		goto out;
	}
	buf_addstr(&path, ".pub");
	buf_addch(&pub, '\n');
	if ((ret = buf_write_file(&pub, path.buf, 0644)) < 0) {
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
		goto out;
	}
	if ((ret = ssh_pubkey_blob(pub.buf, pub.len, &k->host_blob)) < 0) {
		buf_addf(err, "the host key made is not one P-256 key: %s", strerror(-ret));
		goto out;
	}

	/* The user key: its private half stays in memory only. */
	buf_wipe_release(&pem);
	buf_reset(&pub);
	if ((ret = p256_pair(&k->user_key, &pub, err)) < 0)
		goto out;
	buf_addf(&auth, "command=\"%s\",restrict%s %s\n",
	         forced_command ? forced_command : GUEST_FORCED_COMMAND, pty ? ",pty" : "",
	         pub.buf);
	buf_reset(&path);
	buf_addf(&path, "%s/" GUEST_SSH_AUTH, sshdir.buf);
	if ((ret = buf_write_file(&auth, path.buf, 0644)) < 0) {
		buf_addf(err, "cannot write '%s': %s", path.buf, strerror(-ret));
		goto out;
	}
	ret = 0;
out:
	buf_release(&sshdir);
	buf_release(&path);
	buf_wipe_release(&pem);
	buf_release(&pub);
	buf_release(&auth);
	return ret;
}

void ssh_task_keys_release(struct ssh_task_keys *k)
{
	buf_wipe_release(&k->user_key);
	buf_release(&k->host_blob);
}

/* Write all of p to a local fd (blocking, EINTR retried). */
static int write_local(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			poll(&pfd, 1, 1000);
			continue;
		}
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * One read of the channel's stdout (stream 0) or stderr into a local fd:
 * sets *done at the stream's EOF and *progress when bytes moved.  0 or the
 * negative error fail()/fail_ssh() recorded.
 */
static int copy_stream(struct ssh_client *c, LIBSSH2_CHANNEL *ch, int stream, int fd, int *done,
                       int *progress)
{
	const char *what = stream ? "error output" : "output";
	static char data[32 * 1024];
	ssize_t n = libssh2_channel_read_ex(ch, stream, data, sizeof(data));
	int ret;

	if (n > 0) {
		*progress = 1;
		c->delivered += (uint64_t)n;
		if ((ret = write_local(fd, data, (size_t)n)) < 0)
			return fail(c, ret, "cannot write the %s: %s", what, strerror(-ret));
	} else if (n == 0) {
		*done = 1;
	} else if (n != LIBSSH2_ERROR_EAGAIN) {
		return fail_ssh(c, (int)n,
		                stream ? "reading the error output" : "reading the output");
	}
	return 0;
}

static int open_interactive(struct ssh_client *c, struct ssh_interactive *x, LIBSSH2_CHANNEL **out)
{
	LIBSSH2_CHANNEL *ch;
	int ret;

	if ((ret = open_channel(c, out)) < 0)
		return ret;
	ch = *out;
	for (const char *const *e = x->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');

		if (!eq)
			return fail(c, -EINVAL, "not NAME=value: '%.32s'", *e);
		do
			ret = ssh_again(c,
			                libssh2_channel_setenv_ex(ch, *e, (unsigned)(eq - *e),
			                                          eq + 1, (unsigned)strlen(eq + 1)),
			                "sending the environment");
		while (ret > 0);
		if (ret < 0)
			return ret;
	}
	if (x->term) {
		do
			ret = ssh_again(c,
			                libssh2_channel_request_pty_ex(
			                    ch, x->term, (unsigned)strlen(x->term), NULL, 0,
			                    (int)x->cols, (int)x->rows, 0, 0),
			                "asking for a terminal");
		while (ret > 0);
		if (ret < 0)
			return ret;
	}
	do
		ret = ssh_again(c, libssh2_channel_exec(ch, x->command), "starting the command");
	while (ret > 0);
	return ret;
}

/* ssh_interactive()'s state: the local input not yet written, a resize to send. */
struct iact {
	char *in;         /* IACT_IN_SIZE bytes */
	struct chan_in q; /* what of in is to be written */
	int resize_pending;
};

#define IACT_IN_SIZE (16 * 1024)

/*
 * Send the terminal's new size, when a resize is pending and x->get_size
 * gives one; a server that is busy gets it on a later turn, one that refuses
 * it is let be.  *progress when it is done with.
 */
static void iact_resize(LIBSSH2_CHANNEL *ch, struct ssh_interactive *x, struct iact *st,
                        int *progress)
{
	unsigned cols = x->cols, rows = x->rows;

	if (!st->resize_pending || !x->term)
		return;
	if (x->get_size && x->get_size(x->ctx, &cols, &rows) == 0) {
		if (libssh2_channel_request_pty_size(ch, (int)cols, (int)rows) ==
		    LIBSSH2_ERROR_EAGAIN)
			return;
		/* Some servers do not answer; a refused resize is not fatal. */
		x->cols = cols;
		x->rows = rows;
	}
	st->resize_pending = 0;
	*progress = 1;
}

/*
 * With nothing moving: wait (until the next keepalive is due, next seconds)
 * for the socket, the local input (when all before it is written), a resize
 * or the stop fd; then read what came.  0 to go on, or the negative error
 * recorded: the VM idle past c->idle_ms, the stop fd readable, poll failing.
 */
static int iact_wait(struct ssh_client *c, struct ssh_interactive *x, struct iact *st, int next)
{
	struct pollfd pfd[4];
	int dir = libssh2_session_block_directions(c->session), nfd = 0;
	int i_in = -1, i_rs = -1, i_st = -1, ret;
	int64_t now = clock_ms(), wait = next > 0 ? next * 1000 : 1000;

	pfd[nfd++] = (struct pollfd){
	    .fd = c->fd,
	    .events = (short)(POLLIN | ((dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? POLLOUT : 0))};
	if (!st->q.ended && st->q.off == st->q.len) {
		i_in = nfd;
		pfd[nfd++] = (struct pollfd){.fd = x->in_fd, .events = POLLIN};
	}
	if (x->resize_fd >= 0) {
		i_rs = nfd;
		pfd[nfd++] = (struct pollfd){.fd = x->resize_fd, .events = POLLIN};
	}
	if (x->stop_fd >= 0) {
		i_st = nfd;
		pfd[nfd++] = (struct pollfd){.fd = x->stop_fd, .events = POLLIN};
	}
	if ((ret = idle_check(c, now, &wait)) < 0)
		return ret;
	if (poll(pfd, (nfds_t)nfd, (int)wait) < 0) {
		if (errno == EINTR)
			return 0;
		return fail(c, -errno, "cannot poll: %s", strerror(errno));
	}
	if (i_st >= 0 && pfd[i_st].revents)
		return fail(c, -ECONNRESET, "the VM is gone");
	if (i_rs >= 0 && pfd[i_rs].revents) {
		char drain[256];

		while (read(x->resize_fd, drain, sizeof(drain)) > 0)
			;
		st->resize_pending = 1;
	}
	if (i_in >= 0 && pfd[i_in].revents) {
		ssize_t n = read(x->in_fd, st->in, IACT_IN_SIZE);

		if (n > 0) {
			st->q.len = (size_t)n;
			st->q.off = 0;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			st->q.ended = 1;
			st->q.len = st->q.off = 0;
		}
	}
	return 0;
}

int ssh_interactive(struct ssh_client *c, struct ssh_interactive *x)
{
	LIBSSH2_SESSION *s = c->session;
	LIBSSH2_CHANNEL *ch = NULL;
	static char in[IACT_IN_SIZE];
	struct iact st = {.in = in, .q = {.buf = in, .ended = x->in_fd < 0}};
	int ret;

	x->exit_status = -1;
	x->exit_signal[0] = '\0';
	if (!s)
		return fail(c, -ENOTCONN, "no SSH session");
	c->deadline = 0;
	c->unread_free = 1;
	if ((ret = open_interactive(c, x, &ch)) < 0)
		goto out;

	for (;;) {
		int progress = 0, out_done = 0, err_done = 0, next;

		iact_resize(ch, x, &st, &progress);
		if ((ret = chan_write(c, ch, &st.q, "writing the input", "ending the input",
		                      &progress)) < 0 ||
		    (ret = copy_stream(c, ch, 0, x->out_fd, &out_done, &progress)) < 0 ||
		    (ret = copy_stream(c, ch, SSH_EXTENDED_DATA_STDERR, x->err_fd, &err_done,
		                       &progress)) < 0)
			goto out;
		if ((ret = turn_end(c, ch, out_done, err_done, &next)) < 0)
			goto out;
		if (ret)
			break;
		if (!progress && (ret = iact_wait(c, x, &st, next)) < 0)
			goto out;
	}

	if ((ret = close_channel(c, ch)) < 0)
		goto out;
	{
		struct ssh_exec e = {0};

		exit_of(c, ch, &e);
		x->exit_status = e.exit_status;
		memcpy(x->exit_signal, e.exit_signal, sizeof(x->exit_signal));
	}
	ret = 0;
out:
	if (ch && ret == 0)
		libssh2_channel_free(ch);
	return ret;
}
