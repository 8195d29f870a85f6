/* The task CA in the guest (guest_ca.h). */
#include "guest_ca.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/guest_abi.h"
#include "base/banned.h"

/* The system bundle read back to see whether it holds the CA already. */
#define BUNDLE_MAX (16 << 20)

int guest_ca_read(const char *share, struct buf *pem, struct buf *err)
{
	struct buf path = BUF_INIT;
	ssize_t n;
	int fd, ret;

	buf_reset(pem);
	buf_addf(&path, "%s/" GUEST_FILE_TASK_CA, share);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT) {
		ret = 0;
		goto out;
	}
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path.buf, strerror(-ret));
		goto out;
	}
	n = buf_read_fd(pem, fd, GUEST_CA_PEM_MAX);
	close(fd);
	if (n == -EFBIG) {
		ret = -EINVAL;
		buf_addf(err, GUEST_FILE_TASK_CA " is over %d bytes", GUEST_CA_PEM_MAX);
	} else if (n < 0) {
		ret = (int)n;
		buf_addf(err, "cannot read '%s': %s", path.buf, strerror(-ret));
	} else if (!guest_ca_pem_valid(pem->buf, pem->len)) {
		ret = -EINVAL;
		buf_addstr(err, GUEST_FILE_TASK_CA " is not one PEM certificate");
	} else {
		ret = 1;
	}
out:
	if (ret <= 0)
		buf_reset(pem);
	buf_release(&path);
	return ret;
}

int guest_ca_install(const char *path, const struct buf *pem, struct buf *err)
{
	struct buf have = BUF_INIT;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		buf_addf(err, "cannot open '%s': %s", path, strerror(-ret));
		goto out;
	}
	n = buf_read_fd(&have, fd, BUNDLE_MAX);
	if (n < 0) {
		ret = (int)n;
		buf_addf(err, "cannot read '%s': %s", path, strerror(-ret));
		goto out;
	}
	if (have.len && memmem(have.buf, have.len, pem->buf, pem->len))
		goto out;
	if ((have.len && have.buf[have.len - 1] != '\n' && (ret = write_all(fd, "\n", 1)) < 0) ||
	    (ret = write_all(fd, pem->buf, pem->len)) < 0)
		buf_addf(err, "cannot add the task CA to '%s': %s", path, strerror(-ret));
out:
	if (fd >= 0)
		close(fd);
	buf_release(&have);
	return ret;
}
