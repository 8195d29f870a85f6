/*
 * The host-guest contract of aibox's VM, written once and included by both
 * sides: the tools that boot the VM (common/vm/vm.c, common/vm/snapshot.c,
 * aibox-task, aibox-run) and the guest init (image/init/).  docs/internals.md
 * ("The host-guest contract") lists what lives here; docs/image.md has the
 * guest layout these paths make.
 *
 * settings.json's schema, its one writer and its one parser are
 * common/task/task_settings.h; this header holds the names, addresses, caps and
 * checks both of them and everything else on the two sides agree on.
 */
#ifndef AIBOX_GUEST_ABI_H
#define AIBOX_GUEST_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "base/session_file.h"

/* ---- paths in the guest ------------------------------------------------ */
#define GUEST_RUN_DIR "/run/aibox"
/* The secrets a restored VM's go message carried (common/vm/snapshot.h): root's, 0600, on
   /run's tmpfs until the task takes them. */
#define GUEST_GO_SECRETS   GUEST_RUN_DIR "/go-secrets"
#define GUEST_TASK_DIR     "/run/aibox/task" /* the task (or run) folder, read-only (9p) */
#define GUEST_STATE_DIR    "/mnt/state"      /* the state disk */
#define GUEST_HOME         "/home/aibox"     /* the user aibox's home, on the state disk */
#define GUEST_PROJECT_PATH "/project"        /* settings.json "path" when absent */
#define GUEST_USER_UID     1000
#define GUEST_USER_GID     1000

/*
 * The guest's PATH, for PID 1, the task's git and Claude Code, and the run's
 * command; the init looks programs up in it.
 */
#define GUEST_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The branch the task works on, and its ref. */
#define GUEST_BRANCH     "aibox/task"
#define GUEST_BRANCH_REF "refs/heads/" GUEST_BRANCH

/* ---- the task (or run) folder, shared as GUEST_TAG_TASK ----------------- */
/* Its files' names, as the host writes them and the init reads them. */
#define GUEST_FILE_SETTINGS     "settings.json" /* common/task/task_settings.h */
#define GUEST_FILE_PROMPT       "prompt.txt"    /* the task's prompt, at most GUEST_PROMPT_MAX */
#define GUEST_FILE_START_BUNDLE "start.bundle"  /* the start commit and its history */
#define GUEST_FILE_START_IDX    "start.idx"     /* its pack's index: the prepared clone */
/*
 * The task CA's certificate (PEM, never its key) when the proxy intercepts
 * (docs/proxy.md): the host writes it once the proxy made the CA, before the
 * VM boots; the init appends it to the guest's system bundle.  Absent: no CA.
 */
#define GUEST_FILE_TASK_CA "task_ca.pem"
/* The SSH keys (common/vm/ssh.h ssh_task_keys_make()): a folder of the share. */
#define GUEST_SSH_SUBDIR   "ssh"
#define GUEST_SSH_HOST_KEY "ssh_host_ecdsa_key" /* the guest's host key, P-256 (+ ".pub") */
#define GUEST_SSH_AUTH     "authorized_keys"    /* the task key, with the forced command */

/*
 * The prompt's cap in bytes: the host refuses a longer one (common/config/prompt.h)
 * and the init does not run Claude Code with one (docs/prompt.md).
 */
#define GUEST_PROMPT_MAX ((size_t)1 << 20)

/* ---- the modes and the SSH session ------------------------------------- */
/*
 * The kernel command line's key for the mode (common/vm/vm.c writes it, PID 1
 * reads it) and the modes it names, which are settings.json's "mode" too.
 */
#define GUEST_CMDLINE_MODE "aibox.mode="
#define GUEST_MODE_TASK    "task"
#define GUEST_MODE_RUN     "run"
/*
 * The forced command of the task key in authorized_keys: the init, as the
 * session, which runs the SSH command the host asked for: GUEST_CMD_TASK in
 * task mode, GUEST_CMD_RUN in run mode (docs/internals.md).
 */
#define GUEST_INIT_PATH      "/usr/lib/aibox/aibox-init"
#define GUEST_INIT_SESSION   "session"
#define GUEST_FORCED_COMMAND GUEST_INIT_PATH " " GUEST_INIT_SESSION
#define GUEST_CMD_TASK       "task"
#define GUEST_CMD_RUN        "run"
/*
 * aibox run's env values: one SSH environment request of this variable
 * (the guest's sshd accepts only it), its value written by
 * guest_secrets_write() and read by guest_secrets_read() (common/base/guest_secrets.h).
 */
#define GUEST_RUN_ENV_VAR "AIBOX_ENV"

/* ---- the network path (docs/internals.md, "The network path") ---------- */
/* The guestfwd address QEMU gives the task's aibox-proxy, and its URL. */
#define GUEST_PROXY_HOSTPORT "10.0.2.100:3128"
#define GUEST_PROXY_URL      "http://" GUEST_PROXY_HOSTPORT
/*
 * Claude Code's ANTHROPIC_BASE_URL with api "forward": requests for this port
 * of 127.0.0.1 the proxy answers itself (proxy.h), adding the key.
 */
#define GUEST_API_FORWARD_PORT 3129
#define GUEST_STR_(x)          #x
#define GUEST_STR(x)           GUEST_STR_(x)
#define GUEST_API_FORWARD_URL  "http://127.0.0.1:" GUEST_STR(GUEST_API_FORWARD_PORT)
/* The ANTHROPIC_API_KEY the guest gets instead of the key; the proxy puts the real one in. */
#define GUEST_API_KEY_PLACEHOLDER "sk-ant-aibox-placeholder-the-host-adds-the-key"

/* ---- devices: the disks' serials, the virtio-serial port of SSH --------- */
#define GUEST_SERIAL_ROOT  "aibox-root"
#define GUEST_SERIAL_STATE "aibox-state"
#define GUEST_PORT_SSH     "aibox.ssh"

/* ---- 9p shares --------------------------------------------------------- */
/* QEMU's mount_tag limit: a tag is 1 to GUEST_TAG_MAX of [A-Za-z0-9._-]. */
#define GUEST_TAG_MAX     31
#define GUEST_TAG_TASK    "aibox.task"    /* the task folder, at GUEST_TASK_DIR */
#define GUEST_TAG_PROJECT "aibox.project" /* aibox run: the checkout, read-write */
#define GUEST_TAG_HOME    "aibox.home"    /* aibox run: the project's home, read-write */

/* Is t a 9p tag: 1 to GUEST_TAG_MAX bytes of [A-Za-z0-9._-]? */
int guest_tag_valid(const char *t);

/*
 * The tag of the config's mount number i, in both modes: "aibox.m<i>", into
 * out (any size_t fits: 7 + 20 bytes).
 */
void guest_mount_tag(char out[GUEST_TAG_MAX + 1], size_t i);

/* ---- names and paths the host hands over ------------------------------- */
#define GUEST_ENV_NAME_MAX 128
#define GUEST_PATH_MAX     1024

/* Is s an environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most GUEST_ENV_NAME_MAX bytes? */
int guest_env_name_valid(const char *s);

/*
 * Is p a clean absolute path in the guest: '/' and then components
 * separated by single '/', none "." or "..", no trailing '/', not "/"
 * itself, no control character, at most GUEST_PATH_MAX bytes?
 */
int guest_path_valid(const char *p);

#define GUEST_SETTINGS_MAX (1 << 20) /* settings.json, read by the init */
/* The config's check: (settings.json "check"), one printable line run by sh -c after Claude Code */
#define GUEST_CHECK_MAX 4096
/* result.json "check": the end of its output kept */
#define GUEST_CHECK_TAIL_MAX 4096
/* The check's time limit (settings.json "check_timeout_ms"): its default (absent), its bounds */
#define GUEST_CHECK_TIMEOUT_MS     (600 * 1000LL)
#define GUEST_CHECK_TIMEOUT_MIN_MS 1000LL
#define GUEST_CHECK_TIMEOUT_MAX_MS (24 * 3600 * 1000LL)

/* GUEST_FILE_TASK_CA's cap: the host never writes more, the guest refuses more. */
#define GUEST_CA_PEM_MAX (32 * 1024)

/*
 * Is s (n bytes) one PEM certificate as the task CA writes it, at most
 * GUEST_CA_PEM_MAX bytes: "-----BEGIN CERTIFICATE-----\n", lines of 1 to 76
 * base64 characters each ending in "\n" ('=' only in the last line's end),
 * "-----END CERTIFICATE-----\n" and nothing else (no NUL, no CR, no second
 * certificate)?  1 or 0.  The shape only: the bytes are not parsed as DER.
 */
int guest_ca_pem_valid(const char *s, size_t n);

/*
 * ---- the results tar (docs/internals.md, "The results tar") ------------
 * The stream's layout, for the init's writer and the host's reader:
 * common/base/ustar.h.
 */

/* The result files, in the order the init sends them; result.json is last. */
enum {
	RESULT_TRANSCRIPT,
	RESULT_SESSION,
	RESULT_BUNDLE,
	RESULT_VM_LOG,
	RESULT_JSON,
	RESULT_NFILES
};

/* Their caps, in bytes (session.jsonl's is SESSION_FILE_MAX): the host refuses more. */
#define RESULT_TRANSCRIPT_MAX (256ULL << 20)
#define RESULT_BUNDLE_MAX     (2ULL << 30)
#define RESULT_VM_LOG_MAX     (64ULL << 20)
#define RESULT_JSON_MAX       (1024 * 1024)

struct guest_result_file {
	const char *name; /* the tar member's name, also the file's in the task folder */
	uint64_t max;     /* its cap in bytes: the host refuses a larger member */
};

/* Indexed by the enum above. */
extern const struct guest_result_file guest_results[RESULT_NFILES];

/*
 * Every string of this contract, for t/0030-guest-abi.bats, which fails when
 * one is written as a literal outside its module (and when a string macro of
 * this header is missing here).  Ends with a NULL name.
 */
enum guest_literal_kind {
	GUEST_LIT_NAME,  /* a file name: refused as a whole literal or a path's part */
	GUEST_LIT_TOKEN, /* refused anywhere inside a literal */
	GUEST_LIT_WORD,  /* refused as a whole literal; other meanings are listed in the test */
};

struct guest_literal {
	const char *name;  /* the macro, or the table's entry */
	const char *value; /* the string */
	enum guest_literal_kind kind;
	const char *home; /* its module, without .h or .c: the only file that may spell it */
};

extern const struct guest_literal guest_literals[];

/* The kernel command line word of a VM booted to be saved (vm/snapshot.h). */
#define SNAP_CMDLINE "aibox.snapshot=1"

#endif
