/* src/runtime/bwrap.c — the bwrap sandbox: bubblewrap's command line, the
 * seccomp filter, short commands run inside (kbox doctor); see bwrap.h and
 * kbox(7). */
#include "runtime/runtime.h"
#include "runtime/bwrap.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the seccomp filter ---- */

/* Docker's default profile (moby/profiles seccomp/default.json) is the
 * floor: what it refuses to a container without capabilities, kbox
 * refuses too, with EPERM as Docker does (or ENOSYS where the C library
 * falls back to another call).  Docker allows by list and refuses the
 * rest; this filter allows by default and refuses by name, so the names
 * below are Docker's refusals on x86_64 and aarch64 (as of Linux 6.18)
 * plus kbox's own, which a data-analysis kernel does not need either:
 * ptrace, process_vm_readv and _writev, adjtimex, clock_adjtime,
 * name_to_handle_at, fanotify_mark, memfd_secret, modify_ldt. */
static const char *const denied[] = {
        /* other processes: tracing, reading, comparing */
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
        /* mounts, root changes, namespaces */
        "mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns",
        /* the kernel keyring, BPF, perf, userfaultfd */
        "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
        /* kexec, modules */
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
        "create_module", "query_module", "get_kernel_syms",
        /* accounting, swap, reboot, the kernel log, host and domain names */
        "acct", "swapon", "swapoff", "reboot", "syslog", "sethostname", "setdomainname",
        /* the clocks */
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
        /* I/O ports, the LDT, vm86 */
        "iopl", "ioperm", "modify_ldt", "vm86", "vm86old",
        /* NUMA memory policy and page migration (CAP_SYS_NICE in Docker) */
        "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
        /* file handles, fanotify, quotas */
        "name_to_handle_at", "open_by_handle_at", "fanotify_init", "fanotify_mark", "quotactl",
        /* obsolete or never implemented */
        "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "vhangup", "lookup_dcookie",
        "afs_syscall", "getpmsg", "putpmsg", "security", "tuxcall", "vserver", NULL};

/* Refused as well, and newer than some libseccomp's table: NR is the
 * number each has on every architecture libseccomp knows but MIPS (from
 * 424 on, Linux numbers a new call alike everywhere). */
static const struct {
	const char *name;
	int nr;
} denied_new[] = {
        {"io_uring_setup", 425},
        {"io_uring_enter", 426},
        {"io_uring_register", 427},
        {"open_tree", 428},
        {"move_mount", 429},
        {"fsopen", 430},
        {"fsconfig", 431},
        {"fsmount", 432},
        {"fspick", 433},
        {"pidfd_getfd", 438},
        {"process_madvise", 440},
        {"mount_setattr", 442},
        {"quotactl_fd", 443},
        {"memfd_secret", 447},
        {"set_mempolicy_home_node", 450},
        {"lsm_get_self_attr", 459},
        {"lsm_set_self_attr", 460},
        {"lsm_list_modules", 461},
        {"open_tree_attr", 467},
        {"file_getattr", 468},
        {"file_setattr", 469},
        {"listns", 470},
};

/* The number of system call NAME on this architecture: libseccomp's, else
 * NR (0: none) unless the architecture numbers new calls apart (MIPS),
 * else -1 (not known here). */
static int syscall_nr(const char *name, int nr)
{
	int n = seccomp_syscall_resolve_name(name);
	uint32_t arch = seccomp_arch_native();
	if (n != __NR_SCMP_ERROR)
		return n;
	if (nr <= 0 || arch == SCMP_ARCH_MIPS || arch == SCMP_ARCH_MIPSEL ||
	    arch == SCMP_ARCH_MIPS64 || arch == SCMP_ARCH_MIPSEL64 || arch == SCMP_ARCH_MIPS64N32 ||
	    arch == SCMP_ARCH_MIPSEL64N32)
		return -1;
	return nr;
}

/* personality(2) only as Docker allows it: the query (0xffffffff) and
 * PER_LINUX, PER_LINUX32, each with or without UNAME26.  A rule compares
 * each argument once, and with the default to allow there is no "allow
 * these": refuse a value above 32 bits (Docker compares all 64), one with
 * bit 31 clear and any bit but PER_LINUX32's or UNAME26's set, and one
 * with bit 31 set and any other bit clear (only the query has it). */
static int deny_personality(scmp_filter_ctx ctx)
{
	const scmp_datum_t top = 1u << 31, kept = PER_LINUX32 | UNAME26;
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
	                          SCMP_A0(SCMP_CMP_GT, 0xffffffffu));
	for (unsigned i = 0; i < 31; i++) {
		const scmp_datum_t bit = (scmp_datum_t)1 << i;
		if (!(bit & kept))
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
			                       SCMP_A0(SCMP_CMP_MASKED_EQ, top | bit, bit));
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
		                       SCMP_A0(SCMP_CMP_MASKED_EQ, top | bit, top));
	}
	return rc;
}

/* socket(2): AF_ALG and AF_VSOCK (vsock is not namespaced: it reaches the
 * host or hypervisor), as Docker; and netlink other than NETLINK_ROUTE
 * (which the C library's getaddrinfo and getifaddrs use), kbox's own.  The
 * family is compared on its low 32 bits, as the kernel reads it; any
 * protocol but 0 is refused (a bit above 32 too). */
static int deny_sockets(scmp_filter_ctx ctx)
{
	static const scmp_datum_t families[] = {AF_ALG, AF_VSOCK};
	int rc = 0;
	for (size_t i = 0; i < sizeof families / sizeof *families; i++)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
		                       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, families[i]));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
	                       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_NETLINK),
	                       SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE));
	return rc;
}

/* Whiteouts (the character device 0:0 overlayfs reads as "deleted"), which
 * Linux lets anyone make: renameat2(2) with RENAME_WHITEOUT, and mknod(2)
 * of any character device (without CAP_MKNOD the whiteout is the only one
 * that could be made).  kbox's own. */
static int deny_whiteouts(scmp_filter_ctx ctx)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(renameat2), 1,
	                          SCMP_A4(SCMP_CMP_MASKED_EQ, RENAME_WHITEOUT, RENAME_WHITEOUT));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknod), 1,
	                       SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFCHR));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknodat), 1,
	                       SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFCHR));
	return rc;
}

/* No set-user-ID or set-group-ID files: where kbox runs as root, the
 * sandbox's files are root's on the host.  The mode argument of each call
 * that sets one (open and openat only when they create; openat2 and
 * fchmodat2 hide or add theirs: "not implemented", so the C library uses
 * the others).  0, or a negative errno of libseccomp's. */
static int deny_setid_modes(scmp_filter_ctx ctx)
{
	static const struct {
		int nr;
		unsigned mode_arg; /* which argument is the mode */
	} modes[] = {
	        {SCMP_SYS(chmod), 1}, {SCMP_SYS(fchmod), 1}, {SCMP_SYS(fchmodat), 2},
	        {SCMP_SYS(creat), 1}, {SCMP_SYS(mknod), 1},  {SCMP_SYS(mknodat), 2},
	};
	static const scmp_datum_t creating[] = {O_CREAT, __O_TMPFILE};
	int rc = 0;

	for (size_t i = 0; i < 2; i++) {
		const scmp_datum_t bit = i ? S_ISGID : S_ISUID;
		for (size_t k = 0; k < sizeof modes / sizeof *modes; k++)
			rc |= seccomp_rule_add(
			        ctx, SCMP_ACT_ERRNO(EPERM), modes[k].nr, 1,
			        SCMP_CMP(modes[k].mode_arg, SCMP_CMP_MASKED_EQ, bit, bit));
		for (size_t j = 0; j < 2; j++) {
			rc |= seccomp_rule_add(
			        ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(open), 2,
			        SCMP_A1(SCMP_CMP_MASKED_EQ, creating[j], creating[j]),
			        SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit));
			rc |= seccomp_rule_add(
			        ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(openat), 2,
			        SCMP_A2(SCMP_CMP_MASKED_EQ, creating[j], creating[j]),
			        SCMP_A3(SCMP_CMP_MASKED_EQ, bit, bit));
		}
	}
	return rc;
}

/* Seal the memfd FD as it is: what bwrap reads from it can no longer
 * change, whoever else came to hold it.  0 or -1. */
static int seal(int fd)
{
	return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

/* The filter as a BPF program in a memfd (offset 0, sealed), or -1 with
 * ERR: bwrap's --seccomp, and kbox-seccomp's in a container. */
int kr_seccomp_program(kbox_error_t *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	static const unsigned long ns_flags[] = {CLONE_NEWUSER,  CLONE_NEWNS,  CLONE_NEWPID,
	                                         CLONE_NEWNET,   CLONE_NEWUTS, CLONE_NEWIPC,
	                                         CLONE_NEWCGROUP};
	int fd = -1, rc = 0, nr;

	if (!ctx)
		return kbox_error_set(err, KBOX_E_NOMEM, "seccomp: cannot make a filter");
	/* other ABIs (i386, x32) are killed: their syscall numbers differ; the
	 * whole process, not the thread (a thread killed alone leaves the
	 * kernel waiting for it for ever) */
	rc |= seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	for (size_t i = 0; denied[i]; i++)
		if ((nr = syscall_nr(denied[i], 0)) != -1) /* else not on this architecture */
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	for (size_t i = 0; i < sizeof denied_new / sizeof *denied_new; i++)
		if ((nr = syscall_nr(denied_new[i].name, denied_new[i].nr)) != -1)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	rc |= deny_personality(ctx);
	rc |= deny_sockets(ctx);
	rc |= deny_whiteouts(ctx);
	/* clone into new namespaces; clone3 hides its flags in memory, so it
	 * is "not implemented" and the C library falls back to clone */
	for (size_t i = 0; i < sizeof ns_flags / sizeof *ns_flags; i++)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                       SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	rc |= deny_setid_modes(ctx);
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
	if ((nr = syscall_nr("fchmodat2", 452)) != -1) /* Linux 6.6 */
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	/* pushing input into a terminal: compare the low 32 bits only, as the
	 * kernel does (TIOCSTI | 1 << 32 is still TIOCSTI) */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	                       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	                       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (rc) {
		seccomp_release(ctx);
		return kbox_error_set(err, KBOX_E_SYSTEM, "seccomp: cannot add a rule: %s",
		                      strerror(-rc));
	}
	if ((fd = memfd_create("kbox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
		seccomp_release(ctx);
		return kbox_error_set_sys(err, "seccomp: memfd_create");
	}
	rc = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (rc < 0 || lseek(fd, 0, SEEK_SET) < 0 || seal(fd) < 0) {
		close(fd);
		return kbox_error_set(err, KBOX_E_SYSTEM, "seccomp: cannot export the filter: %s",
		                      strerror(rc < 0 ? -rc : errno));
	}
	return fd;
}

/* A memfd holding TEXT at offset 0, sealed, or -1. */
static int data_fd(const char *name, const char *text)
{
	/* (kx_child_exec keeps it open for bwrap) */
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t len = strlen(text);
	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0 || seal(fd) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the command line ---- */

char *kr_bwrap_resolve(const char *cmd, const char *rootfs)
{
	return kx_resolve_command(cmd, rootfs);
}

char *kr_bwrap_path(void)
{
	char *p = kx_resolve_command("bwrap", NULL);
	if (p && access(p, X_OK) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* /etc files and directories a Python data stack reads (each only if the
 * root has it): the loader cache, time zone, alternatives (BLAS, LAPACK),
 * fonts, matplotlib's and Python's settings, MIME types, OS release. */
static const char *const etc_files[] = {
        "ld.so.cache",  "localtime",  "timezone",   "alternatives",   "fonts",
        "matplotlibrc", "mime.types", "os-release", "debian_version", NULL};

bool kr_bwrap_shows(const char *path)
{
	static const char *const top[] = {"/usr",   "/bin",   "/sbin",   "/lib",
	                                  "/lib32", "/lib64", "/libx32", NULL};
	for (size_t i = 0; top[i]; i++) {
		size_t n = strlen(top[i]);
		if (strncmp(path, top[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
			return true;
	}
	if (strncmp(path, "/etc/", 5) != 0)
		return false;
	path += 5;
	for (size_t i = 0; etc_files[i]; i++) {
		size_t n = strlen(etc_files[i]);
		if (strncmp(path, etc_files[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
			return true;
	}
	return strncmp(path, "python3", 7) == 0;
}

/* What of /proc is hidden (as Docker's and runc's masked paths): files
 * behind a bind of /dev/null (unreadable: /proc is nodev), directories
 * behind an empty tmpfs. */
static const char *const proc_masked[] = {
        "kcore",       "kallsyms",      "kpageflags",   "kpagecount", "kpagecgroup",
        "slabinfo",    "vmallocinfo",   "pagetypeinfo", "timer_list", "timer_stats",
        "sched_debug", "latency_stats", "keys",         "key-users",  "sysrq-trigger",
        "acpi",        "scsi",          "asound",       "firmware",   NULL};

/* What of /proc names the host without need, replaced by what a machine
 * without it would show: the host's boot command line and boot
 * configuration (empty), its swap files (none). */
static const struct {
	const char *name, *text;
} proc_replaced[] = {
        {"cmdline", ""},
        {"bootconfig", ""},
        {"swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"},
};

/* A bwrap command line as it is built: its words, and the descriptors it
 * names (bwrap reads them), which the caller is given. */
typedef struct {
	kx_argv_t a;
	int *fds; /* room for BWRAP_FDS_MAX */
	size_t nf;
} bwcmd_t;

#define BWRAP_FDS_MAX 24

/* Add OPTION and the number N, as one word each. */
static void add_opt_int(kx_argv_t *a, const char *option, long long n)
{
	kx_argv_add(a, option, NULL);
	kx_argv_addf(a, "%lld", n);
}

/* The namespaces, identity and privileges of the sandbox. */
static void add_identity(kx_argv_t *a)
{
	kx_argv_add(a, "--unshare-user", "--unshare-pid", "--unshare-net", NULL);
	kx_argv_add(a, "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", NULL);
	kx_argv_add(a, "--disable-userns", NULL);
	add_opt_int(a, "--uid", KR_BWRAP_UID);
	add_opt_int(a, "--gid", KR_BWRAP_UID);
	kx_argv_add(a, "--hostname", "kbox", NULL);
	kx_argv_add(a, "--die-with-parent", "--new-session", NULL);
	kx_argv_add(a, "--cap-drop", "ALL", NULL);
}

/* The system files of ROOT ("" for the host's), read-only: USR (ROOT/usr),
 * the top directories or their links into it, the files of /etc a program
 * reads, Python's /etc, and what the kernel's installation needs besides
 * (RO_BINDS: source and destination pairs, checked by ro_bind.h; may be
 * NULL). */
static void add_system_files(kx_argv_t *a, const char *root, const char *usr, char *const *ro_binds)
{
	static const char *const top[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
	char path[PATH_MAX], target[PATH_MAX];
	struct stat st;
	glob_t g;

	kx_argv_add(a, "--ro-bind", usr, "/usr", NULL);
	for (size_t i = 0; top[i]; i++) {
		ssize_t n;
		snprintf(path, sizeof path, "%s/%s", root, top[i]);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode) && (n = readlink(path, target, sizeof target - 1)) > 0) {
			target[n] = '\0';
			kx_argv_add(a, "--symlink", target, NULL);
			kx_argv_addf(a, "/%s", top[i]);
		} else if (S_ISDIR(st.st_mode)) {
			kx_argv_add(a, "--ro-bind", path, NULL);
			kx_argv_addf(a, "/%s", top[i]);
		}
	}
	for (size_t i = 0; etc_files[i]; i++) {
		snprintf(path, sizeof path, "%s/etc/%s", root, etc_files[i]);
		if (stat(path, &st) == 0) {
			kx_argv_add(a, "--ro-bind", path, NULL);
			kx_argv_addf(a, "/etc/%s", etc_files[i]);
		}
	}
	snprintf(path, sizeof path, "%s/etc/python3*", root);
	if (glob(path, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			kx_argv_add(a, "--ro-bind", g.gl_pathv[i], NULL);
			kx_argv_addf(a, "/etc/%s", strrchr(g.gl_pathv[i], '/') + 1);
		}
		globfree(&g);
	}
	for (size_t i = 0; ro_binds && ro_binds[i] && ro_binds[i + 1]; i += 2)
		kx_argv_add(a, "--ro-bind", ro_binds[i], ro_binds[i + 1], NULL);
}

/* Put TEXT at DEST in the sandbox, read-only, through a memfd named NAME.
 * 0, or -1 with ERR. */
static int add_data(bwcmd_t *c, const char *name, const char *text, const char *dest,
                    kbox_error_t *err)
{
	int fd = data_fd(name, text);

	if (fd < 0)
		return kbox_error_set_sys(err, "cannot make the sandbox's %s", dest);
	c->fds[c->nf++] = fd;
	add_opt_int(&c->a, "--ro-bind-data", fd);
	kx_argv_add(&c->a, dest, NULL);
	return 0;
}

/* The sandbox's own /etc files that name users, groups and the host
 * (kbox's, not the host's).  0, or -1 with ERR. */
static int add_synthetic_etc(bwcmd_t *c, kbox_error_t *err)
{
	static const struct {
		const char *path, *text;
	} synthetic[] = {
	        {"/etc/passwd", "kbox:x:1000:1000:kbox:/home/kbox:/bin/sh\n"
	                        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	        {"/etc/group", "kbox:x:1000:\nnogroup:x:65534:\n"},
	        {"/etc/hosts",
	         "127.0.0.1\tlocalhost kbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	        {"/etc/hostname", "kbox\n"},
	        {"/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n"},
	};

	for (size_t i = 0; i < sizeof synthetic / sizeof *synthetic; i++)
		if (add_data(c, "kbox-etc", synthetic[i].text, synthetic[i].path, err) < 0)
			return -1;
	return 0;
}

/* Its own /proc, with the kernel's settings read-only and what only root
 * may read about the host's memory and kernel masked or replaced.  0, or
 * -1 with ERR. */
static int add_proc(bwcmd_t *c, kbox_error_t *err)
{
	char path[PATH_MAX];
	struct stat st;

	kx_argv_add(&c->a, "--proc", "/proc", NULL);
	kx_argv_add(&c->a, "--ro-bind", "/proc/sys", "/proc/sys", NULL);
	for (size_t i = 0; proc_masked[i]; i++) {
		snprintf(path, sizeof path, "/proc/%s", proc_masked[i]);
		if (stat(path, &st) < 0) /* as here, so in a new /proc */
			continue;
		if (S_ISDIR(st.st_mode)) {
			kx_argv_add(&c->a, "--tmpfs", path, NULL);
			kx_argv_add(&c->a, "--remount-ro", path, NULL); /* empty, and stays so */
		} else
			kx_argv_add(&c->a, "--ro-bind", "/dev/null", path, NULL);
	}
	for (size_t i = 0; i < sizeof proc_replaced / sizeof *proc_replaced; i++) {
		snprintf(path, sizeof path, "/proc/%s", proc_replaced[i].name);
		if (stat(path, &st) == 0 &&
		    add_data(c, "kbox-proc", proc_replaced[i].text, path, err) < 0)
			return -1;
	}
	return 0;
}

/* A tmpfs at DIR of at most SIZE bytes with mode PERMS. */
static void add_tmpfs(kx_argv_t *a, const char *dir, long long size, const char *perms)
{
	add_opt_int(a, "--size", size);
	kx_argv_add(a, "--perms", perms, NULL);
	kx_argv_add(a, "--tmpfs", dir, NULL);
}

/* Its own /dev; private, capped (TMP bytes) /tmp and /dev/shm; what it may
 * write (a home, the workspace, where it starts);
 * and everything else read-only. */
static void add_writable(kx_argv_t *a, const kr_bwrap_opts_t *b, long long tmp)
{
	kx_argv_add(a, "--dev", "/dev", NULL);
	add_tmpfs(a, "/tmp", tmp, "1777");
	add_tmpfs(a, "/dev/shm", tmp, "1777");
	if (b && b->home)
		kx_argv_add(a, "--bind", b->home, "/home/kbox", NULL);
	else
		add_tmpfs(a, "/home/kbox", tmp, "0700");
	if (b && b->workspace) {
		kx_argv_add(a, b->workspace_ro ? "--ro-bind" : "--bind", b->workspace, "/workspace",
		            NULL);
		kx_argv_add(a, "--chdir", "/workspace", NULL);
	} else
		kx_argv_add(a, "--chdir", "/", NULL);
}

/* The kernel's connection file (B->conn_text at B->conn_path), in a tmpfs
 * of the sandbox's own, KR_BWRAP_KERNEL_DIR, that the kernel may write: it
 * binds its sockets there, and ipykernel writes its file again once they
 * are bound (the supervisor reaches them through the sandbox's root,
 * backend_bwrap.c).  0, or -1 with ERR. */
static int add_conn(bwcmd_t *c, const kr_bwrap_opts_t *b, kbox_error_t *err)
{
	int fd;
	if (!b || !b->conn_text || !b->conn_path)
		return 0;
	if ((fd = data_fd("kbox-connection", b->conn_text)) < 0)
		return kbox_error_set_sys(err, "cannot pass the kernel its connection file");
	c->fds[c->nf++] = fd;
	add_tmpfs(&c->a, KR_BWRAP_KERNEL_DIR, 1 << 20, "0700");
	kx_argv_add(&c->a, "--perms", "0600", NULL);
	add_opt_int(&c->a, "--file", fd);
	kx_argv_add(&c->a, b->conn_path, NULL);
	return 0;
}

/* The rest read-only: / and /dev's own tmpfs (its nodes; /dev/shm and
 * /dev/pts are mounts of their own, and stay as they are). */
static void add_read_only(kx_argv_t *a)
{
	kx_argv_add(a, "--remount-ro", "/", NULL);
	kx_argv_add(a, "--remount-ro", "/dev", NULL);
}

/* The descriptors of a synchronised start (B->sync), and the filter,
 * applied just before the command runs.  0, or -1 with ERR. */
static int add_sync_and_filter(bwcmd_t *c, const kr_bwrap_opts_t *b, kbox_error_t *err)
{
	int fd;

	if (b && b->sync) {
		add_opt_int(&c->a, "--info-fd", b->info_fd);
		add_opt_int(&c->a, "--block-fd", b->block_fd);
		c->fds[c->nf++] = b->info_fd;
		c->fds[c->nf++] = b->block_fd;
	}
	if ((fd = kr_seccomp_program(err)) < 0)
		return -1;
	c->fds[c->nf++] = fd;
	add_opt_int(&c->a, "--seccomp", fd);
	return 0;
}

/* Replace C's words by EXE --args FD -- CMD: the options go through a
 * file, for bwrap's command line is the sandbox's /proc/1/cmdline and they
 * name host paths.  0, or -1 with ERR (C's words kept). */
static int move_options_to_file(bwcmd_t *c, const char *exe, char *const *cmd, kbox_error_t *err)
{
	kx_argv_t cl = KX_ARGV_INIT;
	int fd = memfd_create("kbox-bwrap-args", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	bool ok = fd >= 0;

	for (size_t i = 1; ok && i < c->a.n; i++) {
		size_t len = strlen(c->a.v[i]) + 1; /* with its NUL */
		ok = write(fd, c->a.v[i], len) == (ssize_t)len;
	}
	if (!ok || lseek(fd, 0, SEEK_SET) < 0 || seal(fd) < 0) {
		if (fd >= 0)
			close(fd);
		return kbox_error_set_sys(err, "cannot pass bwrap its options");
	}
	c->fds[c->nf++] = fd;
	kx_argv_add(&cl, exe, "--args", NULL);
	kx_argv_addf(&cl, "%d", fd);
	kx_argv_add(&cl, "--", NULL);
	for (size_t i = 0; cmd && cmd[i]; i++)
		kx_argv_add(&cl, cmd[i], NULL);
	if (cl.failed) {
		kx_argv_reset(&cl);
		return kbox_error_set(err, KBOX_E_NOMEM,
		                      "out of memory building the bwrap command");
	}
	kx_argv_reset(&c->a);
	c->a = cl;
	return 0;
}

char **kr_bwrap_argv(const kr_bwrap_opts_t *b, char *const *cmd, int **fds_p, size_t *n_fds,
                     kbox_error_t *err)
{
	const char *root = b && b->rootfs ? b->rootfs : "";
	long long tmp = b && b->tmp_bytes > 0 ? b->tmp_bytes : KR_BWRAP_TMP_BYTES;
	bwcmd_t c = {KX_ARGV_INIT, calloc(BWRAP_FDS_MAX, sizeof(int)), 0};
	char *exe = kr_bwrap_path();
	char usr[PATH_MAX];
	struct stat st;

	*fds_p = NULL;
	*n_fds = 0;
	if (!c.fds) {
		free(exe);
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory");
		return NULL;
	}
	if (!exe) {
		free(c.fds);
		kbox_error_set(err, KBOX_E_NOTFOUND,
		               "bwrap (bubblewrap) is not installed: no bwrap in "
		               "/usr/local/bin, /usr/bin or /bin");
		return NULL;
	}
	snprintf(usr, sizeof usr, "%s/usr", root);
	if (stat(usr, &st) < 0 || !S_ISDIR(st.st_mode)) {
		kbox_error_set(err, KBOX_E_NOTFOUND, "root filesystem %s has no usr directory",
		               *root ? root : "/");
		goto fail;
	}
	kx_argv_add(&c.a, exe, NULL);
	add_identity(&c.a);
	add_system_files(&c.a, root, usr, b ? b->ro_binds : NULL);
	if (add_synthetic_etc(&c, err) < 0 || add_proc(&c, err) < 0)
		goto fail;
	add_writable(&c.a, b, tmp);
	if (add_conn(&c, b, err) < 0)
		goto fail;
	add_read_only(&c.a);
	if (add_sync_and_filter(&c, b, err) < 0)
		goto fail;
	if (c.a.failed) {
		kbox_error_set(err, KBOX_E_NOMEM, "out of memory building the bwrap command");
		goto fail;
	}
	if (move_options_to_file(&c, exe, cmd, err) < 0)
		goto fail;
	free(exe);
	*fds_p = c.fds;
	*n_fds = c.nf;
	return kx_argv_take(&c.a);
fail:
	for (size_t i = 0; i < c.nf; i++)
		close(c.fds[i]);
	free(c.fds);
	free(exe);
	kx_argv_reset(&c.a);
	return NULL;
}

/* ---- per-session bounds, set while the sandbox waits ---- */

pid_t kr_bwrap_info_pid(int info_fd, kbox_error_t *err)
{
	char buf[1024];
	size_t len = 0;
	long pid = -1;
	const char *at;
	while (len < sizeof buf - 1 && !memchr(buf, '}', len)) {
		struct pollfd pfd = {info_fd, POLLIN, 0};
		ssize_t n;
		int r = poll(&pfd, 1, 10000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n = read(info_fd, buf + len, sizeof buf - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (len == 0)
		return 0;
	if (!(at = strstr(buf, "\"child-pid\":")) || sscanf(at + 12, " %ld", &pid) != 1 || pid <= 1)
		return kbox_error_set(err, KBOX_E_SYSTEM,
		                      "bwrap did not say the sandbox's pid (it said \"%.60s\")",
		                      buf);
	return (pid_t)pid;
}

int kr_bwrap_bound(pid_t pid, long nproc, bool inotify, kbox_error_t *err)
{
	static const char *const names[2] = {"max_inotify_instances", "max_inotify_watches"};
	enum { JOIN, NPROC, SYSCTL }; /* the steps: SYSCTL + I writes names[I] */
	struct rlimit rl = {(rlim_t)nproc, (rlim_t)nproc};
	char path[64], file[2][64], value[2][24];
	size_t len[2];
	struct {
		int step, errnum;
	} fail = {0, 0};
	int ns, p[2], st;
	pid_t child;
	ssize_t got;

	for (int i = 0; i < 2; i++) {
		snprintf(file[i], sizeof file[i], "/proc/sys/user/%s", names[i]);
		len[i] = (size_t)snprintf(value[i], sizeof value[i], "%d",
		                          i ? KR_BWRAP_INOTIFY_WATCHES
		                            : KR_BWRAP_INOTIFY_INSTANCES);
	}
	snprintf(path, sizeof path, "/proc/%ld/ns/user", (long)pid);
	if ((ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return kbox_error_set_sys(err, "cannot open the sandbox's user namespace (%s)",
		                          path);
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(ns);
		return kbox_error_set_sys(err, "pipe");
	}
	if ((child = fork()) < 0) {
		close(ns);
		close(p[0]);
		close(p[1]);
		return kbox_error_set_sys(err, "fork");
	}
	if (child == 0) {
		/* only setns, prlimit, open, write, close: a child of a threaded
		 * process; it says which step failed, and its errno */
		close(p[0]);
		if (setns(ns, CLONE_NEWUSER) < 0)
			fail.errnum = errno;
		else if (nproc > 0 && prlimit(pid, RLIMIT_NPROC, &rl, NULL) < 0) {
			fail.step = NPROC;
			fail.errnum = errno;
		} else
			for (int i = 0; inotify && i < 2; i++) {
				int fd = open(file[i], O_WRONLY | O_CLOEXEC);
				if (fd < 0 || write(fd, value[i], len[i]) != (ssize_t)len[i]) {
					fail.step = SYSCTL + i;
					fail.errnum = errno;
					break;
				}
				close(fd);
			}
		if (fail.errnum && write(p[1], &fail, sizeof fail) < 0)
			_exit(1);
		_exit(fail.errnum ? 1 : 0);
	}
	close(ns);
	close(p[1]);
	do
		got = read(p[0], &fail, sizeof fail);
	while (got < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (got == (ssize_t)sizeof fail) {
		errno = fail.errnum;
		if (fail.step == JOIN)
			return kbox_error_set_sys(err, "cannot join the sandbox's user namespace");
		if (fail.step == NPROC)
			return kbox_error_set_sys(
			        err, "cannot set RLIMIT_NPROC of the sandbox (pid %ld) to %ld",
			        (long)pid, nproc);
		kbox_error_set_sys(err, "cannot write %s in the sandbox's user namespace",
		                   file[fail.step - SYSCTL]);
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return kbox_error_set(err, KBOX_E_SYSTEM,
		                      "the process that bounds the sandbox failed "
		                      "(wait status %d)",
		                      st);
	return 0;
}

/* ---- short commands in the sandbox ---- */

int kr_bwrap_sync_open(kr_bwrap_sync_t *s, kr_bwrap_opts_t *b, kbox_error_t *err)
{
	if (pipe2(s->info, O_CLOEXEC) < 0 || pipe2(s->block, O_CLOEXEC) < 0)
		return kbox_error_set_sys(err, "pipe");
	b->sync = true;
	b->info_fd = s->info[1];
	b->block_fd = s->block[0];
	return 0;
}

void kr_bwrap_sync_passed(kr_bwrap_sync_t *s)
{
	s->info[1] = s->block[0] = -1;
}

int kr_bwrap_sync_go(kr_bwrap_sync_t *s, kbox_error_t *err)
{
	if (write(s->block[1], "", 1) != 1)
		return kbox_error_set_sys(err, "cannot let the sandbox go on");
	return 0;
}

void kr_bwrap_sync_close(kr_bwrap_sync_t *s)
{
	kx_close_all(s->info, 2);
	kx_close_all(s->block, 2);
}

/* kr_bwrap_run's child: stdin /dev/null, stdout and stderr on OUT_FD,
 * FDS kept across exec, B's identity taken; execs ARGV or exits 127
 * after a line on stderr. */
static void run_child(const kr_bwrap_opts_t *b, char **argv, int out_fd, const int *fds,
                      size_t n_fds)
{
	int null = open("/dev/null", O_RDONLY);
	dup2(null, 0);
	dup2(out_fd, 1);
	dup2(out_fd, 2);
	for (size_t i = 0; i < n_fds; i++)
		fcntl(fds[i], F_SETFD, 0);
	if (b->drop_ids) {
		kx_ids_t ids = {b->uid, b->gid};
		if (kx_take_ids(&ids) < 0) {
			dprintf(2, "cannot become uid %ld: %s", (long)b->uid, strerror(errno));
			_exit(127);
		}
	}
	execv(argv[0], argv);
	dprintf(2, "cannot run %s: %s", argv[0], strerror(errno));
	_exit(127);
}

int kr_bwrap_run(const kr_bwrap_opts_t *b, char *const *cmd, char *out, size_t size,
                 kbox_error_t *err)
{
	kr_bwrap_opts_t o = *b;
	kr_bwrap_sync_t sync = {{-1, -1}, {-1, -1}};
	char **argv = NULL;
	int *fds = NULL, p[2] = {-1, -1}, st = 0;
	size_t n_fds = 0, len = 0;
	pid_t pid = -1, first;
	ssize_t got;
	bool bounded = b->nproc > 0 || b->inotify;

	if (size)
		out[0] = '\0';
	/* bounded, it waits, its mounts made, until the bounds are set */
	if (bounded && kr_bwrap_sync_open(&sync, &o, err) < 0)
		goto out;
	if (!(argv = kr_bwrap_argv(&o, cmd, &fds, &n_fds, err)))
		goto out;
	if (bounded)
		kr_bwrap_sync_passed(&sync);
	if (pipe2(p, O_CLOEXEC) < 0) {
		kbox_error_set_sys(err, "pipe");
		goto out;
	}
	if ((pid = fork()) < 0) {
		kbox_error_set_sys(err, "fork");
		goto out;
	}
	if (pid == 0)
		run_child(b, argv, p[1], fds, n_fds);
	close(p[1]);
	p[1] = -1;
	/* what only bwrap needed (the info pipe must see its end when bwrap
	 * ends) */
	kx_close_all(fds, n_fds);
	n_fds = 0;
	if (bounded && ((first = kr_bwrap_info_pid(sync.info[0], err)) < 0 ||
	                (first > 0 && (kr_bwrap_bound(first, b->nproc, b->inotify, err) != 0 ||
	                               kr_bwrap_sync_go(&sync, err) < 0)))) {
		kx_kill_wait(pid);
		pid = -1;
		goto out;
	}
	for (;;) {
		char sink[512];
		bool room = len + 1 < size;
		got = room ? read(p[0], out + len, size - len - 1) : read(p[0], sink, sizeof sink);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (room)
			len += (size_t)got;
	}
	if (size)
		out[len] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
		out[--len] = '\0';
out:
	kx_close_all(p, 2);
	kr_bwrap_sync_close(&sync);
	kx_close_all(fds, n_fds);
	free(fds);
	kbox_strv_free(argv);
	if (pid < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int kr_bwrap_probe(const kr_bwrap_opts_t *b, kbox_error_t *err)
{
	char *cmd[] = {"/usr/bin/true", NULL};
	char msg[512];
	int rc = kr_bwrap_run(b, cmd, msg, sizeof msg, err);
	if (rc == 0)
		return 0;
	if (rc > 0)
		kbox_error_set(err, KBOX_E_SYSTEM, "bwrap cannot make the sandbox here: %s",
		               msg[0] ? msg : "it failed without a message");
	return -1;
}
