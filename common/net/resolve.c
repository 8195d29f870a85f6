#include "net/resolve.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/banned.h"

#define MAX_QUEUED 1024

struct host_entry {
	char *name;
	struct sockaddr_storage addr;
	socklen_t len;
};

struct resolve_job {
	struct resolve_job *next;
	char name[RESOLVE_NAME_MAX];
	int port;
	void *cookie;
	int cancelled;
	struct resolve_result res;
};

struct resolver {
	struct host_entry *hosts;
	size_t nhosts, alloc;
	int use_dns;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct resolve_job *queue, **queue_tail, *done;
	int nqueued;
	int stop, refs; /* refs: the owner and each thread; the last one out frees */
};

static int parse_addr(const char *s, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
		((struct sockaddr_in *)ss)->sin_family = AF_INET;
		((struct sockaddr_in *)ss)->sin_port = htons(port);
		*len = sizeof(struct sockaddr_in);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
		*len = sizeof(struct sockaddr_in6);
		return 0;
	}
	return -1;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/*
 * Look name up in DNS (and whatever else nsswitch.conf names) as an absolute
 * name, a final '.' added, so that resolv.conf's search domains are never
 * tried; res filled as resolve.h says (port set in each address).
 */
static void dns_lookup(const char *name, int port, struct resolve_result *res)
{
	struct addrinfo hints, *ai = NULL, *a;
	char absolute[RESOLVE_NAME_MAX + 1];
	size_t n = strlen(name);
	int ret;

	memset(res, 0, sizeof(*res));
	if (n >= RESOLVE_NAME_MAX) {
		res->err = -ENOENT;
		return;
	}
	memcpy(absolute, name, n);
	absolute[n] = '.';
	absolute[n + 1] = '\0';
	if (n && name[n - 1] == '.')
		absolute[n] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(absolute, NULL, &hints, &ai);
	if (ret == 0) {
		for (a = ai; a && res->n < RESOLVE_MAX_ADDRS; a = a->ai_next) {
			if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
			    a->ai_addrlen > sizeof(struct sockaddr_storage))
				continue;
			memcpy(&res->addr[res->n], a->ai_addr, a->ai_addrlen);
			res->len[res->n] = a->ai_addrlen;
			set_port(&res->addr[res->n], port);
			res->n++;
		}
		freeaddrinfo(ai);
		res->err = res->n ? 0 : -ENOENT;
	} else if (ret == EAI_NONAME || ret == EAI_NODATA) {
		res->err = -ENOENT;
	} else if (ret == EAI_AGAIN) {
		res->err = -EAGAIN;
	} else {
		res->err = -EIO;
	}
}

static void read_hosts(struct resolver *r, const char *text)
{
	const char *p = text;

	while (*p) {
		const char *e = strchr(p, '\n');
		char line[1024], *tok, *save = NULL;
		size_t n;
		struct sockaddr_storage ss;
		socklen_t len;

		if (!e)
			e = p + strlen(p);
		n = e - p;
		if (n < sizeof(line)) {
			memcpy(line, p, n);
			line[n] = '\0';
			if (strchr(line, '#'))
				*strchr(line, '#') = '\0';
			tok = strtok_r(line, " \t\r", &save);
			if (tok && !parse_addr(tok, 0, &ss, &len)) {
				while ((tok = strtok_r(NULL, " \t\r", &save))) {
					struct host_entry *h;

					for (char *q = tok; *q; q++)
						*q = (char)tolower((unsigned char)*q);
					ALLOC_GROW(r->hosts, r->nhosts + 1, r->alloc);
					h = &r->hosts[r->nhosts++];
					h->name = xstrdup(tok);
					h->addr = ss;
					h->len = len;
				}
			}
		}
		p = *e ? e + 1 : e;
	}
}

static void destroy(struct resolver *r)
{
	struct resolve_job *j, *next;

	for (j = r->queue; j; j = next) {
		next = j->next;
		free(j);
	}
	for (j = r->done; j; j = next) {
		next = j->next;
		free(j);
	}
	for (size_t i = 0; i < r->nhosts; i++)
		free(r->hosts[i].name);
	free(r->hosts);
	close(r->efd);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

/* Drop one reference under the lock (held on entry, released here). */
static void unref_locked(struct resolver *r)
{
	int last = --r->refs == 0;

	pthread_mutex_unlock(&r->lock);
	if (last)
		destroy(r);
}

static void *worker(void *arg)
{
	struct resolver *r = arg;

	for (;;) {
		struct resolve_job *job;
		uint64_t one = 1;
		int cancelled;

		pthread_mutex_lock(&r->lock);
		while (!r->queue && !r->stop)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->stop) {
			unref_locked(r);
			return NULL;
		}
		job = r->queue;
		r->queue = job->next;
		if (!r->queue)
			r->queue_tail = &r->queue;
		cancelled = job->cancelled;
		pthread_mutex_unlock(&r->lock);

		if (cancelled)
			job->res.err = -EAGAIN;
		else
			dns_lookup(job->name, job->port, &job->res);

		pthread_mutex_lock(&r->lock);
		job->next = r->done;
		r->done = job;
		r->nqueued--;
		pthread_mutex_unlock(&r->lock);
		if (write(r->efd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow at our rates; nothing to do */
		}
	}
	return NULL;
}

struct resolver *resolver_new(const char *hosts_path, int use_dns, int nthreads, struct buf *err)
{
	struct resolver *r = xcalloc(1, sizeof(*r));
	struct buf text = BUF_INIT;
	ssize_t n = buf_read_file(&text, hosts_path ? hosts_path : "/etc/hosts", 1 << 20);

	if (n < 0 && (hosts_path || n != -ENOENT)) {
		buf_addf(err, "cannot read '%s': %s", hosts_path ? hosts_path : "/etc/hosts",
		         strerror((int)-n));
		buf_release(&text);
		free(r);
		return NULL;
	}
	read_hosts(r, text.buf);
	buf_release(&text);
	r->use_dns = use_dns;
	r->refs = 1;
	r->queue_tail = &r->queue;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		buf_addf(err, "eventfd: %s", strerror(errno));
		free(r);
		return NULL;
	}
	for (int i = 0; use_dns && i < nthreads; i++) {
		pthread_t t;
		int ret;

		pthread_mutex_lock(&r->lock);
		r->refs++;
		pthread_mutex_unlock(&r->lock);
		ret = pthread_create(&t, NULL, worker, r);
		if (ret) {
			buf_addf(err, "cannot start a resolver thread: %s", strerror(ret));
			return NULL;
		}
		pthread_detach(t);
	}
	return r;
}

struct resolver *resolver_new_default(int nthreads, struct buf *err)
{
	const char *hosts_file = getenv("AIBOX_PROXY_HOSTS");
	struct resolver *r;

	if (hosts_file && !*hosts_file)
		hosts_file = NULL;
	r = resolver_new(hosts_file, !hosts_file, nthreads, err);
	if (r && !hosts_file) {
		/* Let glibc read nsswitch.conf and resolv.conf while it still can. */
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;

		if (getaddrinfo("localhost", NULL, &hints, &ai) == 0)
			freeaddrinfo(ai);
	}
	return r;
}

int resolver_fd(const struct resolver *r)
{
	return r->efd;
}

int resolver_lookup(struct resolver *r, const char *name, int port, struct resolve_result *res)
{
	memset(res, 0, sizeof(*res));
	if (!parse_addr(name, port, &res->addr[0], &res->len[0])) {
		res->n = 1;
		return 1;
	}
	if (!strcmp(name, "localhost")) {
		parse_addr("127.0.0.1", port, &res->addr[0], &res->len[0]);
		parse_addr("::1", port, &res->addr[1], &res->len[1]);
		res->n = 2;
		return 1;
	}
	for (size_t i = 0; i < r->nhosts && res->n < RESOLVE_MAX_ADDRS; i++) {
		if (strcmp(r->hosts[i].name, name))
			continue;
		res->addr[res->n] = r->hosts[i].addr;
		res->len[res->n] = r->hosts[i].len;
		set_port(&res->addr[res->n], port);
		res->n++;
	}
	if (res->n)
		return 1;
	if (!r->use_dns) {
		res->err = -ENOENT;
		return 1;
	}
	return 0;
}

void resolver_lookup_now(struct resolver *r, const char *name, int port, struct resolve_result *res)
{
	if (!resolver_lookup(r, name, port, res))
		dns_lookup(name, port, res);
}

const char *resolve_strerror(int err)
{
	switch (err) {
	case 0:
		return "resolved";
	case -ENOENT:
		return "no such host name";
	case -EAGAIN:
		return "no answer, try again later";
	default:
		return "name resolution failed";
	}
}

struct resolve_job *resolver_submit(struct resolver *r, const char *name, int port, void *cookie)
{
	struct resolve_job *job;
	size_t n = strlen(name);

	if (n >= sizeof(job->name))
		return NULL;
	pthread_mutex_lock(&r->lock);
	if (r->nqueued >= MAX_QUEUED) {
		pthread_mutex_unlock(&r->lock);
		return NULL;
	}
	job = xcalloc(1, sizeof(*job));
	memcpy(job->name, name, n + 1);
	job->port = port;
	job->cookie = cookie;
	*r->queue_tail = job;
	r->queue_tail = &job->next;
	r->nqueued++;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return job;
}

void resolver_cancel(struct resolver *r, struct resolve_job *job)
{
	pthread_mutex_lock(&r->lock);
	job->cancelled = 1;
	pthread_mutex_unlock(&r->lock);
}

void resolver_collect(struct resolver *r, void (*cb)(void *cookie, struct resolve_result *res))
{
	struct resolve_job *list, *next;
	uint64_t v;

	if (read(r->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing new; the done list is checked anyway */
	}
	pthread_mutex_lock(&r->lock);
	list = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->lock);
	for (; list; list = next) {
		int cancelled;

		next = list->next;
		pthread_mutex_lock(&r->lock);
		cancelled = list->cancelled;
		pthread_mutex_unlock(&r->lock);
		if (!cancelled)
			cb(list->cookie, &list->res);
		free(list);
	}
}

void resolver_free(struct resolver *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_broadcast(&r->cond);
	unref_locked(r);
}
