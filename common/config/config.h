/*
 * The project config: $AIBOX_HOME/projects/<name>/config.yaml.
 *
 * docs/config.md is the user's reference for every key; this header is the
 * contract for the tools.  The file is read with libyaml's event API into a
 * small tree and checked against the schema.  Anything the schema does not
 * expect is refused, never ignored: bad YAML, a second document, an unknown
 * key, a duplicate key, a wrong type, a value out of range, anchors and
 * aliases (so no "billion laughs"), explicit tags, NUL bytes, invalid UTF-8
 * (and so UTF-16), nesting deeper than the schema needs, a file over
 * CONFIG_MAX_BYTES, and lists or strings over their caps.
 *
 * A refusal is one line appended to the caller's buffer:
 *	"<file>:<line>:<column>: <key>: <reason>"
 * e.g. "config.yaml:7:5: git[0].push[1]: 'main..x' is not a branch name or pattern".
 * Lines and columns count from 1; the key is the path to the value at fault.
 *
 * Values of host variables named in env and git are never read here: only
 * their names are checked.  aibox-task reads the values when a task starts.
 */
#ifndef AIBOX_CONFIG_H
#define AIBOX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "net/git_remote.h"
#include "base/guest_abi.h"
#include "base/strvec.h"

struct buf;

#define CONFIG_MAX_BYTES        (256 * 1024)
#define CONFIG_MAX_DEPTH        8 /* the schema needs 4 */
#define CONFIG_MAX_NODES        20000
#define CONFIG_MAX_SCALAR       4096 /* bytes in any one key or value */
#define CONFIG_MAX_ALLOW        256
#define CONFIG_MAX_MOUNTS       32
#define CONFIG_MAX_ENV          128
#define CONFIG_MAX_GIT          32
#define CONFIG_MAX_PUSH         64
#define CONFIG_MAX_SECRETS      32
#define CONFIG_MAX_SECRET_HOSTS 32
#define CONFIG_MAX_RULE_ITEMS   64 /* methods or paths of one allow rule */

/* Defaults and ranges; memory and disk in MiB. */
#define CONFIG_DEFAULT_PATH       GUEST_PROJECT_PATH
#define CONFIG_DEFAULT_MEMORY_MIB 4096
#define CONFIG_MIN_MEMORY_MIB     512
#define CONFIG_MAX_MEMORY_MIB     (1024 * 1024) /* 1T */
#define CONFIG_DEFAULT_CPUS       2             /* or the host's count, if smaller */
#define CONFIG_DEFAULT_DISK_MIB   (20 * 1024)
#define CONFIG_MIN_DISK_MIB       1024
#define CONFIG_MAX_DISK_MIB       (16 * 1024 * 1024) /* 16T, a sparse file */

/* skills, agents, commands: which host folder to mount read-only, if any. */
enum config_claude_dir {
	CONFIG_CLAUDE_DEFAULT, /* ~/.claude/<key>, when it exists */
	CONFIG_CLAUDE_NONE,    /* nothing */
	CONFIG_CLAUDE_PATH,    /* the folder in .path */
};

struct config_claude {
	enum config_claude_dir kind;
	char *path; /* absolute host path for CONFIG_CLAUDE_PATH, else NULL */
};

/* A host folder the VM sees read-only; every mount is read-only. */
struct config_mount {
	char *host; /* absolute, "~/" expanded */
	char *vm;   /* absolute, normalized, not inside or above the project path */
};

/*
 * An allow entry in its map form, {host: H, methods: [...], paths: [...],
 * cache: KIND} (docs/config.md, "allow"): the proxy intercepts H's TLS and
 * lets through only the requests whose method and path match
 * (docs/proxy.md), and answers its artifacts from the dependency cache
 * (docs/cache.md).  The host is also on config.allow.
 */
/* The ecosystem whose rules a cached host follows (docs/cache.md); none: not cached. */
enum config_cache {
	CONFIG_CACHE_NONE,
	CONFIG_CACHE_NPM,
	CONFIG_CACHE_PYPI,
	CONFIG_CACHE_CRATES,
	CONFIG_CACHE_GO,
	CONFIG_CACHE_DEBIAN,
};
/* The last kind: the kinds are CONFIG_CACHE_NPM to this. */
#define CONFIG_CACHE_LAST CONFIG_CACHE_DEBIAN

/* "npm", "pypi", "crates", "go", "debian" for a CONFIG_CACHE_*; NULL for none. */
const char *config_cache_name(enum config_cache k);

struct config_rule {
	char *host;              /* an allow entry, lowercased; no preset */
	enum config_cache cache; /* cache: npm, pypi, crates, go or debian (docs/cache.md) */
	char *sumdb_key;         /* sumdb-key: a Go checksum database's key, or NULL */
	char *prefix;            /* prefix: the path a GOPROXY is served under, or NULL */
	struct strvec methods;   /* uppercase tokens; empty: any method */
	struct strvec paths;     /* '/'-rooted patterns, '*' matches any run; empty: any */
	size_t line;             /* of the entry in the file */
};

/*
 * A secret the VM uses without seeing it (docs/config.md, "secrets"): the
 * VM's NAME holds a placeholder that the proxy swaps for the value toward
 * the hosts named.  Each host is an allow entry (not a preset, not '*') that
 * the allow list allows.
 */
struct config_secret {
	char *env;           /* NAME of the host variable that holds the value */
	struct strvec hosts; /* allow entries, lowercased */
	size_t line;         /* of the entry in the file */
};

/* Which keys the file set itself (the rest hold their defaults). */
#define CONFIG_SET_ALLOW    0x001
#define CONFIG_SET_MOUNTS   0x002
#define CONFIG_SET_SKILLS   0x004
#define CONFIG_SET_AGENTS   0x008
#define CONFIG_SET_COMMANDS 0x010
#define CONFIG_SET_PATH     0x020
#define CONFIG_SET_ENV      0x040
#define CONFIG_SET_GIT      0x080
#define CONFIG_SET_MEMORY   0x100
#define CONFIG_SET_CPUS     0x200
#define CONFIG_SET_DISK     0x400
#define CONFIG_SET_BUDGET   0x800
#define CONFIG_SET_SLURM    0x1000
#define CONFIG_SET_SECRETS  0x2000
#define CONFIG_SET_ATTEMPTS 0x4000
#define CONFIG_SET_CHECK    0x8000

/* check: a shell command line of at most this many bytes, printable, one line. */
#define CONFIG_CHECK_MAX GUEST_CHECK_MAX

#define CONFIG_MAX_SLURM_OPTIONS 32

/* Where aibox task --slurm runs its VM part (docs/slurm.md, docs/config.md "slurm"). */
struct config_slurm {
	char *partition;       /* NULL: Slurm's default partition */
	char *account;         /* NULL: Slurm's default account */
	struct strvec options; /* passed to srun and sbatch as they are, each starting with '-' */
	struct strvec shared;  /* absolute folders the nodes see at the same path */
};

/*
 * Where the file gave each key and each list entry: lines from 1, 0 for what
 * the file does not set.  For messages that name the config's line (the
 * policy's refusals, common/task/policy.h).
 */
struct config_lines {
	size_t key[16]; /* each top key's line, at the bit of its CONFIG_SET_* */
	size_t allow[CONFIG_MAX_ALLOW], env[CONFIG_MAX_ENV];
	size_t mounts[CONFIG_MAX_MOUNTS], git[CONFIG_MAX_GIT];
	size_t budget_task, budget_day;
};

/* The line of the key whose CONFIG_SET_* bit is set_bit, 0 when not in the file. */
size_t config_key_line(const struct config_lines *l, unsigned set_bit);

struct config {
	struct strvec allow; /* proxy entries, hosts lowercased; syntax checked here */
	struct config_mount *mounts;
	size_t nr_mounts;
	struct config_claude skills, agents, commands;
	char *path;        /* where the project sits in the VM */
	struct strvec env; /* names of host variables */
	struct git_remote *git;
	size_t nr_git;
	uint64_t memory_mib;
	int cpus;
	uint64_t disk_mib;
	/* budget: caps in nano-USD (common/config/usage.h, docs/budget.md), 0: none. */
	uint64_t budget_task, budget_day;
	struct config_slurm slurm;
	struct config_rule *rules; /* allow's map entries, in order */
	size_t nr_rules;
	struct config_secret *secrets;
	size_t nr_secrets;
	int attempts; /* attempts: a task's attempts without --attempts (1 to 8; 1 default) */
	char *check;  /* check: the command run in the VM after Claude Code (docs/tasks.md, "The
	                 check"), or  NULL */
	int64_t check_timeout_ms; /* check's timeout: (GUEST_CHECK_TIMEOUT_MIN_MS to _MAX_MS), 0:
	                             GUEST_CHECK_TIMEOUT_MS */
	unsigned set;             /* CONFIG_SET_* */
	struct config_lines lines;
};

/* An empty config holding the defaults (allow list empty). */
void config_init(struct config *cfg);

/* Free everything; config_init() it again before reusing it.  Safe to repeat. */
void config_release(struct config *cfg);

/*
 * Parse data (len bytes; NULs and all) as the config named `name` in
 * messages.  0 with cfg filled (cfg is initialised here; release it even on
 * failure), or -EINVAL with the reason appended to err.
 */
int config_parse(struct config *cfg, const char *name, const char *data, size_t len,
                 struct buf *err);

/*
 * A top key outside the config's schema that the caller reads itself (the
 * policy's own keys, common/task/policy.h): its value a string or a list of
 * strings (or null: an empty list).
 */
#define CONFIG_EXTRA_MAX 64
struct config_extra {
	const char *key;      /* in: the key's name */
	size_t line;          /* out: the key's line, 0 when the file does not have it */
	int is_list;          /* out: the value was a list (or null) */
	struct strvec values; /* out: the string, or the list's entries (strvec_init() first) */
	size_t lines[CONFIG_EXTRA_MAX]; /* out: each entry's line */
};

/*
 * config_parse() with the top keys of extra[0..nr) taken out of the
 * document before the schema sees it, and filled in as above; the config's
 * own keys are checked as config_parse() checks them.  A list of more than
 * CONFIG_EXTRA_MAX entries, or a value that is not a string or a list of
 * strings, is refused as the config's errors are.
 */
int config_parse_extra(struct config *cfg, const char *name, const char *data, size_t len,
                       struct config_extra *extra, size_t nr, struct buf *err);

/*
 * Read and parse the file at path (a regular file of at most
 * CONFIG_MAX_BYTES).  Returns as config_parse(), or -errno when the file
 * cannot be read (the reason in err, "path: strerror" style).
 */
int config_load(struct config *cfg, const char *path, struct buf *err);

/*
 * What of cfg depends on this machine, checked before a task or a run makes
 * anything: each mount's host folder is a folder we can read, and each
 * preset:NAME of allow is a preset aibox has (paths.h presets_dir()).
 * Then each host a preset marks with a cache kind (a line "HOST cache:KIND"
 * in the preset; docs/cache.md) gets a rule {host: HOST, cache: KIND}
 * (line 0) in cfg->rules, unless the config has a rule of its own for it.
 * 0, or -errno with the first problem appended to err:
 *	"mounts[0].host: '/x' is not a folder: No such file or directory"
 *	"allow: unknown preset 'x': cannot read '...': No such file or directory"
 *	"allow: preset:x marks h with cache:maven, not a kind aibox caches"
 */
int config_host_check(struct config *cfg, struct buf *err);

/*
 * The memory key's rule for a value from elsewhere (aibox task --memory,
 * aibox run --memory): parse_size_mib() within CONFIG_MIN_MEMORY_MIB and
 * CONFIG_MAX_MEMORY_MIB.  The cpus key's rule is parse_cpus() (common/base/num.h).
 * 0, or -EINVAL/-ERANGE with the reason appended to err (the text the config
 * gives after "memory: ").
 */
int config_parse_memory(const char *s, uint64_t *mib, struct buf *err);

/* The commented default config a new project gets. */
extern const char config_default_text[];

/*
 * 1 when g lets the VM push to branch (a name without refs/heads/): when one
 * of its push patterns matches by branch_pattern_match() (gitproto.h), the
 * broker's rule, so config and broker agree.
 */
int config_git_push_allowed(const struct git_remote *g, const char *branch);

#endif
