/*
 * test-bundle: the bundle modules' internals, for t/2*.bats.
 *
 *   test-bundle write [--git PROG] [--branch NAME] [--idx IDX] REPO_DIR REV OUT
 *	write a start bundle; prints the commit on success, else
 *	"test-bundle: <message>" on stderr and exits 1 (-EINTR: 3)
 *   test-bundle resolve REPO_DIR REV
 *	resolve only; prints the commit
 *   test-bundle refname NAME
 *	prints "ok" or "bad" (bundle_refname_ok)
 *   test-bundle header FILE
 *	parse a header from a file descriptor; prints version, format, refs,
 *	prerequisites and the pack offset, or "refused: <reason>"; then how
 *	far into the file it read
 *   test-bundle header-time FILE N
 *	open, read and parse the header N times; print the median in microseconds
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "git/bundle_read.h"
#include "git/bundle_write.h"
#include "base/err.h"
#include "base/num.h"
#include "base/banned.h"

static int cmd_write(int argc, char **argv)
{
	struct bundle_write_opts o = {0};
	struct buf err = BUF_INIT;
	char oid[OID_HEX_MAX + 1];
	int i, ret;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--git") && i + 1 < argc)
			o.git = argv[++i];
		else if (!strcmp(argv[i], "--branch") && i + 1 < argc)
			o.branch = argv[++i];
		else if (!strcmp(argv[i], "--idx") && i + 1 < argc)
			o.idx_path = argv[++i];
		else
			break;
	}
	if (argc - i != 3)
		die("usage: test-bundle write [--git PROG] [--branch NAME] [--idx IDX] REPO REV "
		    "OUT");
	o.repo_dir = argv[i];
	o.rev = argv[i + 1];
	o.out_path = argv[i + 2];
	ret = bundle_write_start(&o, oid, &err);
	if (ret < 0)
		fprintf(stderr, "test-bundle: %s\n", err.buf);
	else
		printf("%s\n", oid);
	buf_release(&err);
	return ret == -EINTR ? 3 : ret < 0 ? 1 : 0;
}

static int cmd_resolve(int argc, char **argv)
{
	struct bundle_write_opts o = {0};
	struct buf err = BUF_INIT;
	char oid[OID_HEX_MAX + 1];
	int ret;

	if (argc != 2)
		die("usage: test-bundle resolve REPO REV");
	o.repo_dir = argv[0];
	o.rev = argv[1];
	ret = bundle_resolve_start(&o, oid, &err);
	if (ret < 0)
		fprintf(stderr, "test-bundle: %s\n", err.buf);
	else
		printf("%s\n", oid);
	buf_release(&err);
	return ret < 0 ? 1 : 0;
}

static int cmd_header(int argc, char **argv)
{
	struct bundle_header h = BUNDLE_HEADER_INIT;
	int fd, ret;

	if (argc != 1)
		die("usage: test-bundle header FILE");
	fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die_errno("cannot open '%s'", argv[0]);
	ret = bundle_header_read_fd(&h, fd);
	if (ret < 0)
		die_err(ret, "cannot read '%s'", argv[0]);
	if (ret) {
		printf("refused: %s\n", h.err.buf);
	} else {
		printf("version %d %s\n", h.version, bundle_oid_format_name(h.oid_format));
		for (size_t i = 0; i < h.nr_prereqs; i++)
			printf("prereq %s %s\n", h.prereqs[i].oid, h.prereqs[i].comment);
		for (size_t i = 0; i < h.nr_refs; i++)
			printf("ref %s %s\n", h.refs[i].oid, h.refs[i].name);
		printf("pack at %zu\n", h.pack_offset);
	}
	printf("read %lld\n", (long long)lseek(fd, 0, SEEK_CUR));
	bundle_header_clear(&h);
	close(fd);
	return ret ? 1 : 0;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

static int cmd_header_time(int argc, char **argv)
{
	long n, *us;

	if (argc != 2 || parse_long(argv[1], 1, 100000, &n) < 0)
		die("usage: test-bundle header-time FILE N");
	us = xcalloc((size_t)n, sizeof(*us));
	for (long i = 0; i < n; i++) {
		struct bundle_header h = BUNDLE_HEADER_INIT;
		struct timespec a, b;
		int fd, ret;

		clock_gettime(CLOCK_MONOTONIC, &a);
		fd = open(argv[0], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die_errno("cannot open '%s'", argv[0]);
		ret = bundle_header_read_fd(&h, fd);
		close(fd);
		bundle_header_clear(&h);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (ret)
			die("header refused or unreadable");
		us[i] = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
	}
	qsort(us, (size_t)n, sizeof(*us), cmp_long);
	printf("%ld\n", us[n / 2]);
	free(us);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init(argc, argv);
	if (argc < 2)
		die("usage: test-bundle write|resolve|refname|header ...");
	if (!strcmp(argv[1], "write"))
		return cmd_write(argc - 2, argv + 2);
	if (!strcmp(argv[1], "resolve"))
		return cmd_resolve(argc - 2, argv + 2);
	if (!strcmp(argv[1], "header-time"))
		return cmd_header_time(argc - 2, argv + 2);
	if (!strcmp(argv[1], "header"))
		return cmd_header(argc - 2, argv + 2);
	if (!strcmp(argv[1], "refname") && argc == 3) {
		puts(bundle_refname_ok(argv[2], strlen(argv[2])) ? "ok" : "bad");
		return 0;
	}
	die("unknown command '%s'", argv[1]);
}
