/*
 * The task CA in the guest (docs/proxy.md, "Secrets and interception"): the
 * certificate the host leaves in the task (or run) folder as
 * GUEST_FILE_TASK_CA, added to the system bundle the tools' CA variables
 * (common/base/guest_env.h) point at.  The file is data the init bounds and
 * checks: at most GUEST_CA_PEM_MAX bytes, guest_ca_pem_valid()'s shape.
 */
#ifndef AIBOX_INIT_GUEST_CA_H
#define AIBOX_INIT_GUEST_CA_H

struct buf;

/*
 * Read share/GUEST_FILE_TASK_CA into pem.  0 with pem empty when there is no
 * such file; 1 with the certificate in pem; -EINVAL when it is over the cap
 * or not one PEM certificate, another negative errno when it cannot be read:
 * pem empty then and the reason in err ("task_ca.pem is not one PEM
 * certificate").  A symbolic link is not followed.
 */
int guest_ca_read(const char *share, struct buf *pem, struct buf *err);

/*
 * Append pem (guest_ca_read()'s) to the bundle at path, after a newline when
 * the bundle does not end in one, unless the bundle holds it already (a second
 * session of the same boot).  The bundle is created 0644 when missing; a
 * symbolic link is not followed.  0, or a negative errno with the reason in err.
 */
int guest_ca_install(const char *path, const struct buf *pem, struct buf *err);

#endif
