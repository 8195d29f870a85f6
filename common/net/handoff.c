/* The broker hand-off, both sides: see handoff.h. */
#include "net/handoff.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/broker_req.h"
#include "base/num.h"
#include "base/banned.h"

#define MAX_FDS 4

int handoff_send(int sock, int fd, int remote, const void *data, size_t len)
{
	char hdr[HANDOFF_LINE_MAX];
	int n = remote >= 0 ? snprintf(hdr, sizeof(hdr), "aibox-broker/1 %d %zu\n", remote, len)
	                    : snprintf(hdr, sizeof(hdr), "aibox-broker/1 - %zu\n", len);
	struct iovec iov[2] = {{hdr, (size_t)n}, {(void *)data, len}};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct msghdr msg = {
	    .msg_iov = iov, .msg_iovlen = 2, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *cmsg;
	ssize_t r;

	if (len > HANDOFF_DATA_MAX)
		return -EMSGSIZE;
	memset(&cm, 0, sizeof(cm));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	do
		r = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/* The fds of msg's SCM_RIGHTS into fds (at most MAX_FDS, the rest closed); how many. */
static int take_fds(struct msghdr *msg, int *fds)
{
	int nfds = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nfds < MAX_FDS)
				fds[nfds++] = fd;
			else
				close(fd);
		}
	}
	return nfds;
}

/* The header line "aibox-broker/1 <remote|-> <len>" (NUL-terminated) into m.  0 or -EBADMSG. */
static int parse_line(char *line, size_t rest, struct handoff_msg *m)
{
	char *sp1, *sp2;
	long len;

	if (strncmp(line, "aibox-broker/1 ", 15))
		return -EBADMSG;
	sp1 = line + 14;
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2)
		return -EBADMSG;
	*sp2 = '\0';
	m->remote = -1;
	if (strcmp(sp1 + 1, "-")) {
		size_t k;

		if (breq_remote_number(sp1 + 1, strlen(sp1 + 1), &k) < 0)
			return -EBADMSG;
		m->remote = (long)k;
	}
	if (parse_long(sp2 + 1, 0, HANDOFF_DATA_MAX, &len) < 0 || (size_t)len != rest)
		return -EBADMSG;
	m->len = (size_t)len;
	return 0;
}

int handoff_recv(int sock, struct handoff_msg *m)
{
	char data[HANDOFF_LINE_MAX + HANDOFF_DATA_MAX + 1];
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {data, sizeof(data)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cm.buf,
	                     .msg_controllen = sizeof(cm.buf)};
	int fds[MAX_FDS], nfds, r = -EBADMSG;
	struct stat st;
	char *nl;
	ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);

	if (n < 0)
		return -errno;
	nfds = take_fds(&msg, fds);
	if (n == 0 && !nfds)
		return 0;
	if (nfds != 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		goto out;
	nl = memchr(data, '\n', (size_t)n < HANDOFF_LINE_MAX ? (size_t)n : HANDOFF_LINE_MAX);
	if (!nl)
		goto out;
	*nl = '\0';
	r = parse_line(data, (size_t)n - (size_t)(nl + 1 - data), m);
	if (r < 0)
		goto out;
	if (fstat(fds[0], &st) < 0 || !S_ISSOCK(st.st_mode)) {
		r = -EBADMSG;
		goto out;
	}
	memcpy(m->data, nl + 1, m->len);
	m->fd = fds[0];
	nfds = 0;
	r = 1;
out:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}
