/*
 * proxy.log and the record's counts: one line per request or tunnel, each
 * counted in the record (common/proxy/proxy_report.h) whether the log's cap let
 * it in or not (docs/proxy.md).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log_escape.h"
#include "proxy/log_line.h"
#include "proxy/proxy_impl.h"
#include "proxy/proxy_report.h"
#include "base/spawn.h"
#include "config/usage.h"
#include "base/banned.h"

static void log_write(struct proxy *px, const struct buf *b)
{
	log_line_write(px->cfg->log_fd, b->buf, b->len, &px->log_written);
}

/*
 * A line that would take the log past its cap is counted instead; the first
 * one makes a note (from the reserve), so that a reader of the log sees where
 * it stops.  1 when the line may be written.
 */
static int log_room(struct proxy *px, size_t len)
{
	struct buf b = BUF_INIT;

	if (!px->cfg->log_max ||
	    (!px->log_full && log_line_fits(px->cfg->log_max, px->log_written, len)))
		return 1;
	if (!px->log_full) {
		px->log_full = 1;
		log_line_time(&b);
		buf_addf(&b,
		         " note - (proxy.log reached its cap of %lld bytes: the lines after this "
		         "one are left out, and counted in the last line)\n",
		         (long long)px->cfg->log_max);
		log_write(px, &b);
		buf_release(&b);
	}
	if (px->cfg->report)
		px->cfg->report->log_left_out++;
	return 0;
}

void px_log_left_out(struct proxy *px)
{
	struct buf b = BUF_INIT;

	if (px->cfg->log_fd < 0 || !px->log_full || !px->cfg->report)
		return;
	log_line_time(&b);
	buf_addf(&b, " note - (%llu lines left out: proxy.log reached its cap of %lld bytes)\n",
	         (unsigned long long)px->cfg->report->log_left_out, (long long)px->cfg->log_max);
	log_write(px, &b);
	buf_release(&b);
}

void px_log_note(struct proxy *px, const char *what, int err)
{
	struct buf b = BUF_INIT;

	if (px->cfg->log_fd < 0)
		return;
	log_line_time(&b);
	if (err)
		buf_addf(&b, " note - (%s: %s)\n", what, strerror(err));
	else
		buf_addf(&b, " note - (%s)\n", what);
	if (log_room(px, b.len))
		log_write(px, &b);
	buf_release(&b);
}

/* The host as the log and the record name it: "host:port", "[v6]:port". */
static void host_name(struct buf *b, const struct conn *c)
{
	int v6 = strchr(c->host, ':') != NULL;

	if (v6)
		buf_addch(b, '[');
	log_escape(b, c->host, strlen(c->host), 255, 0);
	if (v6)
		buf_addch(b, ']');
	buf_addf(b, ":%d", c->port);
}

void px_log_line(struct conn *c, const char *verdict, const char *why)
{
	struct proxy *px = c->px;
	struct buf b = BUF_INIT, name = BUF_INIT;

	px_usage_done(c);
	if (c->host[0])
		host_name(&name, c);
	if (px->cfg->report && c->own) {
		/* Not the VM's request: counted apart (docs/internals.md, "aibox-proxy's record").
		 */
		px->cfg->report->own_fetches++;
		px->cfg->report->own_fetch_bytes += c->received;
	} else if (px->cfg->report) {
		if (c->used[0] && c->host[0]) {
			char names[sizeof(c->used)], *save = NULL;

			memcpy(names, c->used, sizeof(names));
			for (char *t = strtok_r(names, ",", &save); t;
			     t = strtok_r(NULL, ",", &save))
				proxy_report_secret(px->cfg->report, t, name.buf, c->used_refused);
		}
		proxy_report_count(px->cfg->report,
		                   !strcmp(verdict, "allowed")   ? PROXY_ALLOWED
		                   : !strcmp(verdict, "refused") ? PROXY_REFUSED
		                                                 : PROXY_FAILED,
		                   c->host[0] ? name.buf : NULL, c->sent, c->received);
	}
	/* An artifact's request: a hit, or a miss (fill, miss, busy, bad); not bypass or meta. */
	if (px->cfg->report && c->cache_note && c->cdig_seen) {
		if (!strcmp(c->cache_note, "hit"))
			px->cfg->report->cache_hits++;
		else
			px->cfg->report->cache_misses++;
	}
	if (px->cfg->log_fd < 0)
		goto out;
	log_line_time(&b);
	/*
	 * The verdict first, then the host, then what the client sent: a parser
	 * takes the verdict and the host from fixed fields before any field the
	 * client controls (a method spelled "allowed" cannot pass for one).
	 */
	buf_addf(&b, " %s %s", verdict, c->host[0] ? name.buf : "-");
	if (c->what[0])
		buf_addf(&b, " %s", c->what);
	if (why)
		buf_addf(&b, " (%s)", why);
	if (c->status)
		buf_addf(&b, " status=%d", c->status);
	if (c->cache_note)
		buf_addf(&b, " cache=%s", c->cache_note);
	/* The names passed config's check: no spaces, printable. */
	if (c->used[0])
		buf_addf(&b, " %s=%s", c->used_refused ? "secret" : "secrets", c->used);
	if (c->us_counted) {
		/* The model name passed usage_stream's check: printable, no spaces. */
		buf_addf(&b, " model=%s", c->req_model[0] ? c->req_model : "-");
		for (int k = 0; k < USAGE_KINDS; k++)
			buf_addf(&b, " %s=%llu", usage_kind_names[k],
			         (unsigned long long)c->req_tokens.n[k]);
		if (c->req_tokens.searches)
			buf_addf(&b, " web_searches=%llu",
			         (unsigned long long)c->req_tokens.searches);
		buf_addstr(&b, " usd=");
		usage_format_usd(&b, c->req_nano);
		if (c->iter_nano) {
			buf_addstr(&b, " iterations_usd=");
			usage_format_usd(&b, c->iter_nano);
		}
		if (c->charged_max)
			buf_addstr(&b, c->charged_max > 1 ? " charged=max_tokens,prompt"
			                                  : " charged=max_tokens");
	}
	buf_addf(&b, " sent=%llu received=%llu duration=%.3fs\n", (unsigned long long)c->sent,
	         (unsigned long long)c->received, (double)(px->now_ms - c->start_ms) / 1000.0);
	if (log_room(px, b.len))
		log_write(px, &b);
out:
	buf_release(&b);
	buf_release(&name);
}
