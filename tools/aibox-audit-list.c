/*
 * aibox-audit-list: the entries of the audit record (common/task/audit.h,
 * docs/security.md "The audit record").
 *
 *	aibox audit list [--json] [--since WHEN] [FILE]
 *
 * One line an entry, oldest first: its time (local), event, task, project
 * and what it says; with --json the entries as they are, one JSON array.
 * --since takes a date (2026-12-04), or a duration back from now (2h, 7d is
 * 168h).  FILE defaults to $AIBOX_HOME/audit.jsonl.  The chain is not
 * checked here: aibox audit verify checks it.  Exit 0; 2 for a usage error
 * or a file that cannot be read.  See docs/man/aibox-audit-list.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "task/audit.h"
#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/strvec.h"
#include "base/banned.h"

static const char usage_text[] =
    "usage: aibox audit list [--json] [--since WHEN] [FILE]\n"
    "\n"
    "List the entries of the audit record (default $AIBOX_HOME/audit.jsonl),\n"
    "oldest first.\n"
    "\n"
    "    --json         the entries as one JSON array\n"
    "    --since WHEN   only entries from WHEN on: a date like 2026-12-04, or a\n"
    "                   duration back from now like 2h\n"
    "    -h, --help     show this help\n"
    "\n"
    "Exit 0; 2: usage error, or the file cannot be read.\n";

/* --since: a local date at 00:00, or now minus a duration. */
static time_t parse_since(const char *v)
{
	struct buf why = BUF_INIT;
	struct tm tm = {0};
	int64_t ms;
	char *end;

	end = strptime(v, "%Y-%m-%d", &tm);
	if (end && !*end) {
		tm.tm_isdst = -1;
		return mktime(&tm);
	}
	if (duration_parse(v, &ms, &why) < 0)
		die("--since: '%s' is not a date like 2026-12-04 or a duration like 2h", v);
	buf_release(&why);
	return time(NULL) - (time_t)(ms / 1000);
}

static void print_entry(json_t *o)
{
	time_t t = (time_t)json_integer_value(json_object_get(o, "time"));
	struct tm tm;
	char when[32] = "?";
	const char *key;
	json_t *v;

	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%s", when);
	json_object_foreach(o, key, v)
	{
		if (!strcmp(key, "time") || !strcmp(key, "prev") || !strcmp(key, "hash"))
			continue;
		if (json_is_string(v))
			printf(" %s=%s", key, json_string_value(v));
		else
			printf(" %s=%lld", key, (long long)json_integer_value(v));
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"since", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct buf why = BUF_INIT, path = BUF_INIT, data = BUF_INIT;
	json_t *all = json_array();
	time_t since = 0;
	const char *v;
	int opt, json = 0, fd;
	size_t line = 0;
	ssize_t n;

	tool_init(argc, argv);
	while ((opt = opt_next(argc, argv, "h", options, &v, &why)) != OPT_END) {
		switch (opt) {
		case 'j':
			json = 1;
			break;
		case 's':
			since = parse_since(v);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case OPT_WORD:
			if (path.len) {
				error("unexpected argument '%s'", v);
				usage_die(usage_text);
			}
			buf_addstr(&path, v);
			break;
		default:
			error("%s", why.buf);
			usage_die(usage_text);
		}
	}
	for (int i = optind; i < argc; i++) {
		if (path.len) {
			error("unexpected argument '%s'", argv[i]);
			usage_die(usage_text);
		}
		buf_addstr(&path, argv[i]);
	}
	if (!path.len)
		audit_path(&path);
	fd = open(path.buf, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		die_errno("cannot open '%s'", path.buf);
	if (fd >= 0 && (n = buf_read_fd(&data, fd, 256 * 1024 * 1024)) < 0)
		die_err((int)n, "cannot read '%s'", path.buf);
	if (fd >= 0)
		close(fd);
	for (const char *p = data.buf, *end = data.buf + data.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		json_t *o;

		line++;
		o = json_loadb(p, nl ? (size_t)(nl - p) : (size_t)(end - p), 0, NULL);
		if (!json_is_object(o))
			die("%s:%zu: not an audit entry", path.buf, line);
		if ((time_t)json_integer_value(json_object_get(o, "time")) >= since) {
			if (json)
				json_array_append(all, o);
			else
				print_entry(o);
		}
		json_decref(o);
		if (!nl)
			break;
		p = nl + 1;
	}
	if (json) {
		char *text = json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		if (!text)
			die("cannot write JSON");
		puts(text);
		free(text);
	}
	json_decref(all);
	if (fflush(stdout) != 0 || ferror(stdout))
		die_errno("cannot write to stdout");
	buf_release(&why);
	buf_release(&path);
	buf_release(&data);
	return 0;
}
