/* The VM phase of a task (task_vm.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "net/dep_cache.h"
#include "base/clock.h"
#include "base/paths.h"
#include "task/helpers.h"
#include "base/err.h"
#include "base/out.h"
#include "task/task_results.h"
#include "task/host_start.h"
#include "base/sandbox.h"
#include "task/shares.h"
#include "vm/snapshot.h"
#include "proxy/spend.h"
#include "task/task_folder.h"
#include "task/task_log.h"
#include "task/task_record.h"
#include "task/task_session.h"
#include "task/task_vm.h"
#include "vm/vm.h"
#include "base/guest_abi.h"
#include "base/banned.h"

/* From QEMU's start to the guest's SSH banner, at most. */
#define SSH_WAIT_MS (600 * 1000)
/*
 * The product's limit: the VM is stopped 25 minutes after the timeout (the
 * default check's 10 included), plus the time a longer check: may take.
 */
#define SESSION_GRACE_MS (25L * 60 * 1000)

int64_t task_check_extra_ms(const struct config *cfg)
{
	return cfg && cfg->check && cfg->check_timeout_ms > GUEST_CHECK_TIMEOUT_MS
	           ? cfg->check_timeout_ms - GUEST_CHECK_TIMEOUT_MS
	           : 0;
}
#define SESSION_IDLE_MS 300000
/* How long the helpers' last lines may take through the relay once they ended. */
#define RELAY_END_MS 2000

/* The files of the phase, made in the task folder; -1 when not (yet) made. */
struct files {
	int broker_log, proxy_log, usage, console;
	int disk;      /* the state disk's folder: a VM paused on a full disk is said (ssh.h) */
	int watch;     /* an epoll fd of the helpers' pidfds: readable when one of them ended */
	int pidfds[2]; /* the proxy's and the broker's, in it (closing one takes it out) */
};

/*
 * An epoll fd that becomes readable when the proxy or the broker ends, so
 * that the boot and the session stop at once without them; -1 when it
 * cannot be made (then a dead helper is noticed only by what fails).
 */
static int watch_helpers(const struct helpers *h, struct files *f)
{
	const struct spawn *sp[] = {&h->proxy, &h->broker};
	int ep = epoll_create1(EPOLL_CLOEXEC);

	for (size_t i = 0; ep >= 0 && i < ARRAY_SIZE(sp); i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		int fd = sp[i]->pid > 0 ? (int)syscall(SYS_pidfd_open, sp[i]->pid, 0) : -1;

		f->pidfds[i] = fd;
		if (fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(ep);
			ep = -1;
		}
	}
	return ep;
}

/* How long a helper's clean exit waits for the other's end to be seen (ms). */
#define HELPER_PEER_MS 500

/* 1 when sp's process has ended (not reaped), how in *si; else 0. */
static int helper_gone(const struct spawn *sp, siginfo_t *si)
{
	memset(si, 0, sizeof(*si));
	return sp->pid > 0 && waitid(P_PID, (id_t)sp->pid, si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       si->si_pid == sp->pid;
}

/*
 * Which helper ended, and how, into why (the task's line).  One's end ends
 * the other (the broker serves the proxy's connection and exits 0 when it
 * closes), and the two can be seen in either order: a helper that was killed
 * or failed is the one named; one that exited 0 only when the other is not
 * seen to end within HELPER_PEER_MS, or ended as cleanly.
 */
static void helper_ended(const struct helpers *h, struct buf *why)
{
	const struct spawn *sp[] = {&h->proxy, &h->broker};
	const char *name[] = {"aibox-proxy", "aibox-broker"};
	int64_t until = clock_ms() + HELPER_PEER_MS;
	siginfo_t si[2];
	int gone[2], pick;

	for (;;) {
		pick = -1;
		for (int i = 0; i < 2; i++)
			gone[i] = helper_gone(sp[i], &si[i]);
		for (int i = 0; i < 2 && pick < 0; i++)
			if (gone[i] && !(si[i].si_code == CLD_EXITED && si[i].si_status == 0))
				pick = i;
		if (pick >= 0 || (gone[0] && gone[1]) || clock_ms() >= until)
			break;
		poll(NULL, 0, 10);
	}
	if (pick < 0)
		pick = gone[0] ? 0 : gone[1] ? 1 : -1;
	if (pick < 0)
		return;
	buf_reset(why);
	if (si[pick].si_code == CLD_EXITED)
		buf_addf(why, "%s exited with %d while the task ran", name[pick],
		         si[pick].si_status);
	else
		buf_addf(why, "%s was killed by SIG%s while the task ran", name[pick],
		         sigabbrev_np(si[pick].si_status) ? sigabbrev_np(si[pick].si_status) : "?");
}

/* How long a QEMU whose connection closed may take to be seen ended. */
#define QEMU_END_MS 500

/*
 * 1 when QEMU has ended (waited up to wait_ms for it), with how and when
 * (`when`: "before the VM's SSH server answered") into why, replacing it;
 * 0 when it runs.  With powered_off_ok, a QEMU that exited with 0 counts as
 * running: the guest powers off once the host ends its session (a refused
 * result, say), and the session's own reason stands.  QEMU is not reaped:
 * vm_stop() does that.
 */
static int qemu_ended(const struct vm *vm, int wait_ms, int powered_off_ok, const char *when,
                      struct buf *why)
{
	struct pollfd p = {.fd = vm->pidfd, .events = POLLIN};
	siginfo_t si = {0};

	if (vm->pid <= 0 || (vm->pidfd >= 0 && poll(&p, 1, wait_ms) <= 0) ||
	    waitid(P_PID, (id_t)vm->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
	    si.si_pid != vm->pid)
		return 0;
	if (powered_off_ok && si.si_code == CLD_EXITED && si.si_status == 0)
		return 0;
	buf_reset(why);
	if (si.si_code == CLD_EXITED)
		buf_addf(why, "QEMU exited with %d %s", si.si_status, when);
	else
		buf_addf(why, "QEMU was killed by SIG%s %s",
		         sigabbrev_np(si.si_status) ? sigabbrev_np(si.si_status) : "?", when);
	return 1;
}

static int make(const struct task_vm *v, const char *name, int flags, int *fd, struct buf *err)
{
	*fd = task_folder_open(v->dir, name, flags | O_CREAT | O_EXCL);
	if (*fd < 0)
		buf_addf(err, "cannot create '%s/%s': %s", v->dir, name, strerror(-*fd));
	return *fd < 0 ? *fd : 0;
}

/*
 * The dependency cache's scope of the project of task folder dir
 * (PROJECT/tasks/NAME): "project:PROJECT", in scope; empty when its name is
 * not one a scope takes (then artifacts fetched with a secret are not kept).
 */
static void cache_scope(const char *dir, struct buf *scope)
{
	const char *end = dir + strlen(dir), *p;
	int slashes = 0;

	for (p = end; p > dir; p--)
		if (p[-1] == '/' && ++slashes == 2)
			break;
	if (slashes < 2)
		return;
	end = p - 1;
	for (p = end; p > dir && p[-1] != '/'; p--)
		;
	if (end > p) {
		char *name = xstrndup(p, (size_t)(end - p));

		dep_cache_project_scope(name, scope);
		free(name);
	}
}

static int start_helpers(const struct task_vm *v, struct helpers *h, struct files *f,
                         struct out_relay *relay, struct buf *err)
{
	struct helpers_opts ho = {0};
	struct buf scope = BUF_INIT;
	int ret;

	/* Their lines get the task's prefix (common/base/out.h); without a relay they are bare. */
	if ((ret = out_relay_start(relay, 2, "aibox", v->id)) < 0) {
		buf_addf(err, "cannot start the relay of the helpers' lines: %s", strerror(-ret));
		return ret;
	}

	if ((v->cfg->nr_git &&
	     (ret = make(v, "broker.log", O_WRONLY | O_APPEND, &f->broker_log, err)) < 0) ||
	    (ret = make(v, "proxy.log", O_WRONLY | O_APPEND, &f->proxy_log, err)) < 0 ||
	    (v->api_key && (ret = make(v, "usage.json", O_WRONLY, &f->usage, err)) < 0))
		return ret;
	ho.cfg = v->cfg;
	ho.sock_path = v->proxy_sock;
	ho.proxy_log_fd = f->proxy_log;
	ho.broker_log_fd = f->broker_log;
	ho.api_key = v->api_key;
	ho.spend = v->spend;
	ho.tokens = v->tokens;
	ho.secret_values = v->secret_values;
	ho.placeholders = v->placeholders;
	ho.oauth = v->oauth;
	ho.oauth_placeholder = v->oauth_placeholder;
	ho.report = 1;
	ho.no_sandbox = v->no_sandbox;
	ho.err_fd = relay->fd;
	cache_scope(v->dir, &scope);
	ho.cache_scope = scope.len ? scope.buf : NULL;
	ret = dep_cache_read_max(deps_cache_max_file(), &ho.cache_max, err);
	if (ret == 0)
		ret = helpers_start(h, &ho, err);
	buf_release(&scope);
	/* The VM trusts the task CA: its certificate goes in the task folder (docs/proxy.md). */
	if (ret == 0)
		ret = helpers_ca_write(h, v->dir, err);
	/* Only the helpers hold the pipe now: the relay ends when they do. */
	close(relay->fd);
	relay->fd = -1;
	/* The summary reads the record, not proxy.log, whose size the VM drives. */
	close(f->proxy_log);
	f->proxy_log = -1;
	return ret;
}

static int start_vm(const struct task_vm *v, struct vm *vm, int console_fd,
                    const struct buf *secrets, struct buf *err)
{
	struct vm_config vc = VM_CONFIG_INIT;
	struct buf plog = BUF_INIT;
	int ret;

	vc.image_dir = v->image_dir;
	vc.share_dir = v->dir;
	vc.mode = GUEST_MODE_TASK;
	host_vm_config(&vc, v->cfg, v->shares);
	vc.state_dir = v->state_dir;
	vc.proxy_socket = v->proxy_sock;
	buf_addf(&plog, "%s/proxy.log", v->dir);
	vc.conns_log = plog.buf; /* aibox-connect's refusals (its cap: VM_MAX_CONNS) */
	vc.log_fd = console_fd;
	/* Each QEMU, a snapshot's saving one too, is the handler's to kill (vm.h). */
	vc.stop = v->stop;
	vc.qemu_pid = v->qemu_pid;
	/* A restore hands them to the guest's init with its go message. */
	vc.secrets = secrets->buf;
	vc.secrets_len = secrets->len;
	ret = v->snapshot ? snapshot_boot(&vc, vm) : vm_start(&vc, vm);
	if (ret < 0) {
		buf_addf(err, "cannot start the VM: %s", strerror(-ret));
	} else {
		if (vm->note[0])
			v->say(v->say_ctx, vm->note);
		if (!vm->kvm)
			v->say(v->say_ctx, "no KVM here: the VM runs under TCG, much slower");
	}
	buf_release(&plog);
	return ret;
}

/* The session, once the VM's SSH server answered; o->session_ret and o->why. */
static void session(const struct task_vm *v, struct vm *vm, const struct files *f,
                    struct buf *secrets, struct vm_outcome *o)
{
	struct task_session s = {0};

	s.fd = vm->ssh_fd;
	s.keys = v->keys;
	s.id = v->id;
	s.err_fd = 2;
	s.err_base = v->err_base;
	s.log_fd = v->aibox_log_fd;
	/* What the go message carried does not come again: the stdin is empty. */
	s.secrets = vm->secrets_sent ? "" : secrets->buf;
	s.secrets_len = vm->secrets_sent ? 0 : secrets->len;
	for (int i = 0; i < RESULT_NFILES; i++)
		s.result_fds[i] = v->result_fds[i];
	s.timeout_ms = v->timeout_ms + SESSION_GRACE_MS + (long)task_check_extra_ms(v->cfg);
	s.idle_ms = v->idle_ms > 0 ? v->idle_ms : SESSION_IDLE_MS;
	s.disk_fd = f->disk;
	s.stop_fd = f->watch;
	s.disk_name = v->state_dir;
	o->session_ret = task_session_run(&s);
	task_log_ssh(v->aibox_log_fd, &s.times);
	if (s.times.banner > 0 && s.times.started >= s.times.banner)
		o->ssh_s = (double)(s.times.started - s.times.banner) / 1e3;
	if (o->session_ret < 0 && !*v->stop)
		buf_addf(&o->why, "%s", s.err.buf);
	task_session_clear(&s);
}

/*
 * Everything stopped: QEMU (not waited for), the proxy (its record kept), the
 * broker, and the relay of their lines once it wrote their last ones.
 */
static void stop_all(const struct task_vm *v, struct vm *vm, struct helpers *h,
                     struct out_relay *relay, struct vm_outcome *o, int usage_fd)
{
	if (vm->ssh_fd >= 0)
		shutdown(vm->ssh_fd, SHUT_RDWR);
	/*
	 * Everything the VM had to give is in the result files (or never
	 * will be): nothing in it is kept, so it is killed without a grace;
	 * its exit (25-35 ms under TCG) goes on while the proxy stops, and it
	 * is reaped after.
	 */
	vm_kill(vm);
	if (o) {
		o->have_report = helpers_stop_proxy(h, &o->report, &o->report_why) == 0;
		if (o->have_report && o->report.usage.present &&
		    spend_write_usage(usage_fd, &o->report.usage) < 0) {
			struct buf line = BUF_INIT;

			buf_addf(&line, "cannot write usage.json: %s", strerror(errno));
			v->say(v->say_ctx, line.buf);
			buf_release(&line);
		}
	}
	helpers_stop(h);
	if (vm->pid > 0)
		vm_stop(vm, 0);
	*v->qemu_pid = -1;
	out_relay_end(relay, RELAY_END_MS);
}

int task_vm_run(const struct task_vm *v, struct buf *secrets, struct vm_outcome *o, struct buf *err)
{
	struct helpers h = HELPERS_INIT;
	struct out_relay relay = OUT_RELAY_INIT;
	struct vm vm = VM_INIT;
	struct files f = {-1, -1, -1, -1, -1, -1, {-1, -1}};
	int ret;

	if ((ret = start_helpers(v, &h, &f, &relay, err)) < 0 ||
	    (ret = make(v, "console.log", O_WRONLY | O_APPEND, &f.console, err)) < 0)
		goto fail;
	task_log_phase(v->aibox_log_fd, v->tphase, "proxy");
	/* Not having it only costs the early word on a full disk. */
	f.disk = open(v->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	f.watch = watch_helpers(&h, &f);
	/* A start that failed because it was stopped ends as stopped (below). */
	if (!*v->stop && (ret = start_vm(v, &vm, f.console, secrets, err)) < 0 && !*v->stop)
		goto fail;
	/* Everything is open: from here on no file is opened and nothing runs. */
	if (!v->no_sandbox && (ret = sandbox_lockdown(SANDBOX_SECCOMP, 0)) < 0) {
		buf_addf(err, "cannot lock aibox-task down: %s", strerror(-ret));
		goto fail;
	}
	vm.stop_fd = f.watch; /* set after the start, which makes vm anew */
	ret = *v->stop ? -EINTR : vm_wait_ssh(&vm, SSH_WAIT_MS);
	if (ret == -ECANCELED && !*v->stop) {
		helper_ended(&h, &o->why);
	} else if (ret == -ECHILD && !*v->stop &&
	           qemu_ended(&vm, 0, 0, "before the VM's SSH server answered", &o->why)) {
		buf_addf(&o->why, " (see %s/console.log)", v->dir);
	} else if (ret < 0 && !*v->stop) {
		vm_wait_ssh_why(ret, SSH_WAIT_MS, &o->why);
		/* What QEMU and the guest's kernel said is there. */
		buf_addf(&o->why, " (see %s/console.log)", v->dir);
	}
	o->boot_s = task_log_phase(v->aibox_log_fd, v->tphase, "boot");
	o->session_ret = ret;
	if (ret == 0 && !*v->stop)
		session(v, &vm, &f, secrets, o);
	if (o->session_ret == -ECANCELED && !*v->stop)
		helper_ended(&h, &o->why);
	else if (ret == 0 && o->session_ret < 0 && !*v->stop)
		/* The VM's connection broke because QEMU ended: that is what is said. */
		qemu_ended(&vm, QEMU_END_MS, 1, "while the task ran", &o->why);
	o->session_s = task_log_phase(v->aibox_log_fd, v->tphase, "session");
	buf_wipe_release(secrets);
	if (ret == 0 && o->session_ret == 0 && !*v->stop && v->results_in)
		v->results_in(v->say_ctx);
	stop_all(v, &vm, &h, &relay, o, f.usage);
	task_log_phase(v->aibox_log_fd, v->tphase, "stop");
	if (*v->stop)
		task_why_stopped(&o->why, *v->stop);
	ret = 0;
	goto out;
fail:
	stop_all(v, &vm, &h, &relay, NULL, -1);
out:
	if (f.broker_log >= 0)
		close(f.broker_log);
	if (f.usage >= 0)
		close(f.usage);
	if (f.console >= 0)
		close(f.console);
	if (f.disk >= 0)
		close(f.disk);
	if (f.watch >= 0)
		close(f.watch);
	for (size_t i = 0; i < ARRAY_SIZE(f.pidfds); i++)
		if (f.pidfds[i] >= 0)
			close(f.pidfds[i]);
	return ret;
}

int task_vm_finished(const struct vm_outcome *o, int stopped, const struct task_result *r,
                     const char *end_commit)
{
	return o->session_ret == 0 && !stopped && !o->why.len && r && !r->failed_step &&
	       r->has_claude && r->claude.has_exit_code && r->claude.exit_code == 0 &&
	       (!r->claude.has_ended_by || r->claude.ended_by == ENDED_COMPLETED) &&
	       (!r->changes || end_commit) && !(o->have_report && o->report.usage.capped);
}
