/*
 * test-slurm: common/slurm's files and arguments, for t/5007-slurm-files.bats.
 *
 *   test-slurm secrets-write DIR KEY TOKENS ENV USER_KEY HOST_BLOB [SECRETS OAUTH]
 *   test-slurm secrets-take DIR         each field as NAME=value, then the secrets'
 *                                       and the token's lines as "secret PH VALUE"
 *                                       and "oauth PH VALUE" (or "pairs refused"),
 *                                       or "error <errno>: <why>"
 *   test-slurm status-write OK STOPPED BOOT SESSION WHY REPORT|- REPORT_WHY
 *                                       slurm.status's JSON on stdout
 *   test-slurm status-parse FILE        its fields, or "error: <why>" (exit 1)
 *   test-slurm shared DIR [SHARED...]   "shared", or "error <errno>: <why>" (exit 1)
 *   test-slurm job-args NAME MEM_MIB CPUS TIMEOUT_MS PARTITION|- ACCOUNT|- [OPTION...]
 *                                       the options, one a line
 *   test-slurm job-id TEXT              sbatch --parsable's TEXT: "id=<id>", or "error" (exit 1)
 *   test-slurm job-write DIR ID COMMIT  DIR/slurm.job
 *   test-slurm job-read DIR             "id=<id> start=<commit>", or "error <errno>" (exit 1)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "task/slurm.h"
#include "task/slurm_detach.h"
#include "base/strvec.h"
#include "base/banned.h"

static void put(const char *name, const struct buf *b)
{
	printf("%s=", name);
	fwrite(b->buf, 1, b->len, stdout);
	printf("\n");
}

static int cmd_secrets_write(int argc, char **argv)
{
	struct buf err = BUF_INIT;
	struct slurm_secrets s = SLURM_SECRETS_INIT;
	int ret;

	buf_addstr(&s.key, argv[3]);
	buf_addstr(&s.tokens, argv[4]);
	buf_addstr(&s.env, argv[5]);
	buf_addstr(&s.user_key, argv[6]);
	buf_addstr(&s.host_blob, argv[7]);
	if (argc > 9) {
		buf_addstr(&s.secrets, argv[8]);
		buf_addstr(&s.oauth, argv[9]);
	} else if (argc > 8) {
		die("secrets-write: SECRETS without OAUTH");
	}
	ret = slurm_secrets_write(argv[2], &s, &err);
	slurm_secrets_wipe(&s);
	if (ret < 0)
		printf("error %d: %s\n", -ret, err.buf);
	buf_release(&err);
	return ret < 0;
}

static int cmd_secrets_take(int argc, char **argv)
{
	struct buf err = BUF_INIT;
	struct slurm_secrets s = SLURM_SECRETS_INIT;
	int ret;

	ret = slurm_secrets_take(argv[2], &s, &err);
	if (ret < 0) {
		printf("error %d: %s\n", -ret, err.buf);
		buf_release(&err);
		return 1;
	}
	put("key", &s.key);
	put("tokens", &s.tokens);
	put("env", &s.env);
	put("user_key", &s.user_key);
	put("host_blob", &s.host_blob);
	for (int f = 0; f < 2; f++) {
		struct strvec ph = STRVEC_INIT, val = STRVEC_INIT;

		if (slurm_pairs_parse(f ? &s.oauth : &s.secrets, &ph, &val) < 0)
			printf("%s pairs refused\n", f ? "oauth" : "secret");
		for (size_t i = 0; i < ph.nr; i++)
			printf("%s %s %s\n", f ? "oauth" : "secret", ph.v[i], val.v[i]);
		strvec_clear(&ph);
		strvec_clear(&val);
	}
	slurm_secrets_wipe(&s);
	return 0;
}

static int cmd_status_write(int argc, char **argv)
{
	struct slurm_status st = SLURM_STATUS_INIT;
	struct buf out = BUF_INIT;

	st.session_ok = atoi(argv[2]);
	st.stopped = atoi(argv[3]);
	st.boot_s = atof(argv[4]);
	st.session_s = atof(argv[5]);
	buf_addstr(&st.why, argv[6]);
	if (strcmp(argv[7], "-")) {
		st.have_report = 1;
		buf_addstr(&st.report, argv[7]);
	}
	buf_addstr(&st.report_why, argv[8]);
	slurm_status_json(&st, &out);
	fwrite(out.buf, 1, out.len, stdout);
	slurm_status_release(&st);
	buf_release(&out);
	return 0;
}

static int cmd_status_parse(int argc, char **argv)
{
	struct buf err = BUF_INIT;
	struct slurm_status st = SLURM_STATUS_INIT;
	struct buf data = BUF_INIT;
	ssize_t n = buf_read_file(&data, argv[2], 64 * 1024 * 1024);

	if (n < 0)
		die_err((int)n, "cannot read '%s'", argv[2]);
	if (slurm_status_parse(data.buf, data.len, &st, &err) < 0) {
		printf("error: %s\n", err.buf);
		buf_release(&err);
		buf_release(&data);
		return 1;
	}
	printf("session_ok=%d stopped=%d boot_s=%.3f session_s=%.3f have_report=%d\n",
	       st.session_ok, st.stopped, st.boot_s, st.session_s, st.have_report);
	put("why", &st.why);
	put("report", &st.report);
	put("report_why", &st.report_why);
	slurm_status_release(&st);
	buf_release(&data);
	return 0;
}

static int cmd_shared(int argc, char **argv)
{
	struct buf err = BUF_INIT;
	struct strvec shared = STRVEC_INIT;
	int ret;

	for (int i = 3; i < argc; i++)
		strvec_push(&shared, argv[i]);
	ret = slurm_shared_check(argv[2], &shared, &err);
	strvec_clear(&shared);
	if (ret < 0)
		printf("error %d: %s\n", -ret, err.buf);
	else
		printf("shared\n");
	buf_release(&err);
	return ret < 0;
}

static int cmd_job_args(int argc, char **argv)
{
	struct slurm_job j = {0};
	struct strvec args = STRVEC_INIT, options = STRVEC_INIT;

	for (int i = 8; i < argc; i++)
		strvec_push(&options, argv[i]);
	j.name = argv[2];
	j.memory_mib = strtoull(argv[3], NULL, 10);
	j.cpus = atoi(argv[4]);
	j.timeout_ms = strtoll(argv[5], NULL, 10);
	j.partition = strcmp(argv[6], "-") ? argv[6] : NULL;
	j.account = strcmp(argv[7], "-") ? argv[7] : NULL;
	j.options = &options;
	slurm_job_args(&args, &j);
	for (size_t i = 0; i < args.nr; i++)
		printf("%s\n", args.v[i]);
	strvec_clear(&args);
	strvec_clear(&options);
	return 0;
}

static int cmd_job_id(int argc, char **argv)
{
	char id[SLURM_JOB_ID_MAX + 1];

	if (slurm_job_id_parse(argv[2], strlen(argv[2]), id) < 0) {
		printf("error\n");
		return 1;
	}
	printf("id=%s\n", id);
	return 0;
}

static int cmd_job_write(int argc, char **argv)
{
	struct buf err = BUF_INIT;
	struct slurm_job_rec r;

	if (strlen(argv[3]) > SLURM_JOB_ID_MAX || strlen(argv[4]) > 64)
		die("job-write: too long");
	memcpy(r.id, argv[3], strlen(argv[3]) + 1);
	memcpy(r.start_commit, argv[4], strlen(argv[4]) + 1);
	if (slurm_job_write(argv[2], &r, &err) < 0)
		die("%s", err.buf);
	return 0;
}

static int cmd_job_read(int argc, char **argv)
{
	struct slurm_job_rec r;
	int dfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret;

	if (dfd < 0)
		die_errno("cannot open '%s'", argv[2]);
	if ((ret = slurm_job_read(dfd, &r)) < 0) {
		printf("error %d\n", -ret);
		return 1;
	}
	printf("id=%s start=%s\n", r.id, r.start_commit);
	return 0;
}

/* The commands and their argc: exactly, or at least (the rest a list). */
static const struct {
	const char *name;
	int argc, at_least;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"secrets-write", 8, 1, cmd_secrets_write},
    {"secrets-take", 3, 0, cmd_secrets_take},
    {"status-write", 9, 0, cmd_status_write},
    {"status-parse", 3, 0, cmd_status_parse},
    {"shared", 3, 1, cmd_shared},
    {"job-args", 8, 1, cmd_job_args},
    {"job-id", 3, 0, cmd_job_id},
    {"job-write", 5, 0, cmd_job_write},
    {"job-read", 3, 0, cmd_job_read},
};

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-slurm COMMAND ARGS...");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name) &&
		    (argc == commands[i].argc || (commands[i].at_least && argc > commands[i].argc)))
			return commands[i].fn(argc, argv);
	die("usage: test-slurm COMMAND ARGS... (see its source)");
}
