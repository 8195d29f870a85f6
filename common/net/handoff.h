/*
 * The hand-off of a client connection from aibox-proxy to aibox-broker, both
 * sides (docs/internals.md, "Broker hand-off"; docs/broker.md, "Hand-off
 * from the proxy").  Over a unix SOCK_SEQPACKET socket, one message per
 * connection: the data "aibox-broker/1 <remote|-> <len>\n" followed by
 * exactly <len> bytes the proxy already read from the connection, and the
 * connection itself as the one SCM_RIGHTS fd.
 */
#ifndef AIBOX_HANDOFF_H
#define AIBOX_HANDOFF_H

#include <stddef.h>

#include "net/http.h"

/*
 * The bytes read ahead: at most a request head, the proxy's own read
 * buffer (common/proxy/proxy_request.c reads a head into HTTP_MAX_HEAD bytes).
 */
#define HANDOFF_DATA_MAX HTTP_MAX_HEAD
/* The header line before them, "aibox-broker/1 <remote> <len>\n", at most. */
#define HANDOFF_LINE_MAX 64

/*
 * The proxy's side: send fd with the len bytes at data for remote (>= 0, or
 * -1 for "-").  Never blocks.  0, or -errno from sendmsg(2): -EAGAIN when
 * the broker's queue is full, -EPIPE, -ECONNREFUSED, -ECONNRESET or
 * -ENOTCONN when the broker is gone.  The caller still owns fd.
 */
int handoff_send(int sock, int fd, int remote, const void *data, size_t len);

/* One message received. */
struct handoff_msg {
	int fd;      /* the connection, now the caller's to close */
	long remote; /* the remote number, -1 for "-" */
	size_t len;
	char data[HANDOFF_DATA_MAX];
};

/*
 * The broker's side: wait for one message on sock.  1 with m filled, 0 at
 * the end (the proxy closed its side), -EBADMSG for a malformed message
 * (no fd or more than one, a truncated message, a bad header line, <len>
 * not the bytes that came, the fd not a socket: every fd received is
 * closed), or -errno from recvmsg(2) (-EINTR after a signal).
 */
int handoff_recv(int sock, struct handoff_msg *m);

#endif
