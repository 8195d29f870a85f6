/*
 * aibox-audit-list: the entries of the audit record (common/task/audit.h,
 * docs/security.md "The audit record").
 *
 *	aibox audit list [--json] [--since WHEN] [--log | --syslog FILE | FILE]
 *
 * One line an entry, oldest first: its time (local), event, task, project
 * and what it says; with --json the entries as they are, one JSON array.
 * --since takes a date (2026-12-04), or a duration back from now (2h, 7d is
 * 168h).  FILE defaults to $AIBOX_HOME/audit.jsonl.  --log reads the system
 * log's copy instead: the journal when journald listens (entries with
 * SYSLOG_IDENTIFIER=aibox and an AIBOX_AUDIT field, each given "log_uid",
 * the journal's _UID), else the syslog file AUDIT_SYSLOG_FILE; --syslog
 * reads FILE as a syslog file ("... aibox[PID]: aibox-audit: {...}" lines).
 * Which was read is said on stderr.  The chain is not checked here: aibox
 * audit verify checks it.  Exit 0; 2 for a usage error or a file or journal
 * that cannot be read.  See docs/man/aibox-audit-list.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "task/audit.h"
#include "base/buf.h"
#include "base/duration.h"
#include "base/err.h"
#include "base/opt.h"
#include "base/strvec.h"
#include "base/banned.h"

/* Where rsyslog writes authpriv on Debian (its rsyslog.conf: auth,authpriv.*). */
#define AUDIT_SYSLOG_FILE "/var/log/auth.log"
#define FILE_MAX          (256 * 1024 * 1024)

static const char usage_text[] =
    "usage: aibox audit list [--json] [--since WHEN] [--log | --syslog FILE | FILE]\n"
    "\n"
    "List the entries of the audit record (default $AIBOX_HOME/audit.jsonl),\n"
    "oldest first.\n"
    "\n"
    "    --json         the entries as one JSON array\n"
    "    --since WHEN   only entries from WHEN on: a date like 2026-12-04, or a\n"
    "                   duration back from now like 2h\n"
    "    --log          the system log's copy: the journal where journald runs,\n"
    "                   else " AUDIT_SYSLOG_FILE "\n"
    "    --syslog FILE  the system log's copy in the syslog file FILE\n"
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

/* One entry read: listed (or kept for --json) when it is from since on. */
static void take(json_t *o, time_t since, int json, json_t *all)
{
	if ((time_t)json_integer_value(json_object_get(o, "time")) < since)
		return;
	if (json)
		json_array_append(all, o);
	else
		print_entry(o);
}

/* All of the file at path into data; a missing one is empty when missing_ok. */
static void read_whole(const char *path, int missing_ok, struct buf *data)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 && (errno != ENOENT || !missing_ok))
		die_errno("cannot open '%s'", path);
	if (fd >= 0 && (n = buf_read_fd(data, fd, FILE_MAX)) < 0)
		die_err((int)n, "cannot read '%s'", path);
	if (fd >= 0)
		close(fd);
}

/*
 * The entry of a syslog file's line "... aibox[PID]: aibox-audit: {...}",
 * or NULL for any other line.  Anyone may send such a line: the file's
 * template says who did only when it has the sender's uid.
 */
static json_t *syslog_entry(const char *p, size_t len)
{
	static const char tag[] = "]: " AUDIT_TAG, ident[] = " " AUDIT_IDENT "[";
	const char *at = memmem(p, len, tag, sizeof(tag) - 1), *q;

	if (!at)
		return NULL;
	for (q = at; q > p && q[-1] >= '0' && q[-1] <= '9'; q--)
		;
	if (q == at || (size_t)(q - p) < sizeof(ident) - 1 ||
	    memcmp(q - (sizeof(ident) - 1), ident, sizeof(ident) - 1))
		return NULL;
	at += sizeof(tag) - 1;
	return json_loadb(at, (size_t)(p + len - at), JSON_REJECT_DUPLICATES, NULL);
}

/*
 * The entries of the audit file at path (a missing one has none; a line
 * not an entry dies) or, with syslog, of the syslog file at path (its lines
 * of aibox-audit; one not an entry is skipped with a warning).
 */
static void read_lines(const char *path, int syslog, time_t since, int json, json_t *all)
{
	struct buf data = BUF_INIT;
	size_t line = 0;

	read_whole(path, !syslog, &data);
	for (const char *p = data.buf, *end = data.buf + data.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *o = syslog ? syslog_entry(p, len) : json_loadb(p, len, 0, NULL);

		line++;
		if (!syslog && !json_is_object(o))
			die("%s:%zu: not an audit entry", path, line);
		if (o && !json_is_object(o))
			warning("%s:%zu: an aibox-audit line that is not an entry, skipped", path,
			        line);
		else if (o)
			take(o, since, json, all);
		json_decref(o);
		if (!nl)
			break;
		p = nl + 1;
	}
	buf_release(&data);
}

/* The journal's entries of aibox's audit record, each with "log_uid", its _UID. */
static void read_journal(time_t since, int json, json_t *all)
{
	static const char field[] = "AIBOX_AUDIT=";
	sd_journal *j;
	int ret;

	if ((ret = sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY)) < 0)
		die_err(ret, "cannot open the journal");
	if ((ret = sd_journal_set_data_threshold(j, 0)) < 0 ||
	    (ret = sd_journal_add_match(j, "SYSLOG_IDENTIFIER=" AUDIT_IDENT, 0)) < 0)
		die_err(ret, "cannot read the journal");
	while ((ret = sd_journal_next(j)) > 0) {
		const void *d;
		size_t len;
		json_t *o;

		if (sd_journal_get_data(j, "AIBOX_AUDIT", &d, &len) < 0 || len < sizeof(field) - 1)
			continue;
		o = json_loadb((const char *)d + sizeof(field) - 1, len - (sizeof(field) - 1),
		               JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(o)) {
			char uid[16] = "";

			if (sd_journal_get_data(j, "_UID", &d, &len) == 0 && len > 5 &&
			    len - 5 < sizeof(uid))
				memcpy(uid, (const char *)d + 5, len - 5);
			json_object_set_new(o, "log_uid", json_integer(strtoll(uid, NULL, 10)));
			take(o, since, json, all);
		}
		json_decref(o);
	}
	if (ret < 0)
		die_err(ret, "cannot read the journal");
	sd_journal_close(j);
}

int main(int argc, char **argv)
{
	static const struct opt_spec options[] = {
	    {"json", 0, OPT_FLAG, NULL, 'j', "the entries as one JSON array"},
	    {"since", 0, OPT_TEXT, "WHEN", 's',
	     "only entries from WHEN on: a date like 2026-12-04, or a"},
	    {"log", 0, OPT_FLAG, NULL, 'l',
	     "the system log's copy: the journal where journald runs,"},
	    {"syslog", 0, OPT_FILE, "FILE", 'S', "the system log's copy in the syslog file FILE"},
	    {NULL, 0, 0, NULL, 0, NULL},
	};
	struct buf why = BUF_INIT, path = BUF_INIT;
	json_t *all = json_array();
	time_t since = 0;
	const char *v, *syslog_file = NULL;
	int opt, json = 0, log = 0;

	tool_init(argc, argv);
	while ((opt = opt_parse(argc, argv, options, &v, &why)) != OPT_END) {
		if (opt == OPT_DESCRIBE)
			opt_describe_exit(options);
		switch (opt) {
		case 'j':
			json = 1;
			break;
		case 's':
			since = parse_since(v);
			break;
		case 'l':
			log = 1;
			break;
		case 'S':
			syslog_file = v;
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
	if ((log || syslog_file) && path.len) {
		error("--log and --syslog read the system log, not a FILE");
		usage_die(usage_text);
	}
	if (syslog_file || (log && !audit_journal_running())) {
		if (!syslog_file)
			syslog_file = AUDIT_SYSLOG_FILE;
		fprintf(stderr, "%s: the system log's copy, from the syslog file '%s'\n", progname,
		        syslog_file);
		read_lines(syslog_file, 1, since, json, all);
	} else if (log) {
		fprintf(stderr, "%s: the system log's copy, from the journal\n", progname);
		read_journal(since, json, all);
	} else {
		if (!path.len)
			audit_path(&path);
		fprintf(stderr, "%s: the audit file '%s'\n", progname, path.buf);
		read_lines(path.buf, 0, since, json, all);
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
	return 0;
}
