/* src/cli/cmd_internal.c — the helper commands a supervisor runs (not for
 * people: no man pages).  They do what needs libzmq and libsodium, so the
 * supervisor itself links neither (see kbox/backend.h):
 *
 *   kbox _kernel [--bwrap [--rootfs DIR] [--home DIR] [--tmp-size BYTES]
 *                [--rlimit-fsize N] [--rlimit-data N] [--rlimit-nproc N]]
 *               SPEC CONN RUNTIME_DIR WORKSPACE LOG [KEY=VALUE]...
 *       write the connection file CONN and become SPEC's kernel (exec),
 *       or bwrap running it in the sandbox (kbox_kernel_exec_bwrap)
 *   kbox _ready CONN TIMEOUT_MS      wait for kernel_info_reply (exit 0)
 *   kbox _shutdown CONN TIMEOUT_MS   shutdown_request, wait for the reply
 *   kbox _interrupt CONN TIMEOUT_MS  interrupt_request, wait for the reply
 *
 * Errors: one line on stderr, exit status 1 (127 when _kernel cannot exec). */
#include "config.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int kernel(int argc, char **argv)
{
	kbox_error_t err = {0};
	kbox_kspec_t *spec;
	kbox_kernel_opts_t ko = {0};
	kbox_bwrap_opts_t bo = {0};
	bool bwrap = false;
	int i = 1;

	/* options first: --bwrap [--rootfs DIR] [--home DIR] [--tmp-size BYTES]
	 * [--rlimit-fsize N] [--rlimit-data N] [--rlimit-nproc N] */
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--bwrap") == 0)
			bwrap = true;
		else if (strcmp(argv[i], "--rootfs") == 0)
			bo.rootfs = argv[++i];
		else if (strcmp(argv[i], "--home") == 0)
			bo.home = argv[++i];
		else if (strcmp(argv[i], "--tmp-size") == 0)
			bo.tmp_bytes = atoll(argv[++i]);
		else if (strcmp(argv[i], "--rlimit-fsize") == 0)
			bo.rlimit_fsize = atoll(argv[++i]);
		else if (strcmp(argv[i], "--rlimit-data") == 0)
			bo.rlimit_data = atoll(argv[++i]);
		else if (strcmp(argv[i], "--rlimit-nproc") == 0)
			bo.rlimit_nproc = atol(argv[++i]);
		else
			break;
	}
	argc -= i - 1;
	argv += i - 1;
	if (argc < 6) {
		cli_error("_kernel", "usage: kbox _kernel [--bwrap [--rootfs DIR] [--home DIR] "
		                     "[--tmp-size BYTES]] SPEC CONN RUNTIME_DIR WORKSPACE LOG [K=V]...");
		return 127;
	}
	if (!(spec = kbox_kspec_find(argv[1], &err))) {
		cli_error("_kernel", "%s", err.msg);
		return 127;
	}
	ko.runtime_dir = argv[3];
	ko.cwd = argv[4];
	ko.log_path = strcmp(argv[5], "/dev/null") == 0 ? NULL : argv[5];
	ko.env = (const char *const *)(argv + 6);
	/* both return only on failure */
	if (bwrap)
		kbox_kernel_exec_bwrap(spec, &ko, &bo, argv[2], &err);
	else
		kbox_kernel_exec(spec, &ko, argv[2], &err);
	cli_error("_kernel", "%s", err.msg);
	if (ko.log_path) { /* where the error a failed start reports points */
		FILE *f = fopen(ko.log_path, "ae");
		if (f) {
			fprintf(f, "kbox: the kernel could not be started: %s\n", err.msg);
			fclose(f);
		}
	}
	kbox_kspec_destroy(&spec);
	return 127;
}

static long long kbox_now_ms_cli(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int talk(const char *cmd, int argc, char **argv)
{
	kbox_error_t err = {0};
	kbox_conn_t *conn = NULL;
	kbox_client_t *c = NULL;
	kbox_msg_t *reply = NULL;
	int timeout, rc = 1;
	if (argc != 3) {
		cli_error(cmd, "usage: kbox %s CONNECTION_FILE TIMEOUT_MS", cmd);
		return 1;
	}
	timeout = atoi(argv[2]);
	{
		/* _ready runs while the kernel's _kernel step may still be writing
		 * the file: wait for a complete one */
		long long deadline = kbox_now_ms_cli() + timeout;
		while (!(conn = kbox_conn_load(argv[1], &err)) && strcmp(cmd, "_ready") == 0 &&
		       kbox_now_ms_cli() < deadline)
			usleep(10000);
	}
	if (!conn || !(c = kbox_client_new(conn, &err)))
		goto out;
	if (strcmp(cmd, "_ready") == 0) {
		if (kbox_client_wait_ready(c, timeout, &err) == 0)
			rc = 0;
	} else if (strcmp(cmd, "_shutdown") == 0) {
		if ((reply = kbox_client_shutdown(c, false, timeout, &err)))
			rc = 0;
	} else {
		json_t *content = json_object();
		if ((reply = kbox_client_request(c, KBOX_CH_CONTROL, "interrupt_request", &content,
		                                 timeout, &err)))
			rc = 0;
	}
out:
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	kbox_msg_destroy(&reply);
	kbox_client_destroy(&c);
	kbox_conn_destroy(&conn);
	return rc;
}

int cli_internal(int argc, char **argv)
{
	if (strcmp(argv[0], "_kernel") == 0)
		return kernel(argc, argv);
	if (strcmp(argv[0], "_ready") == 0 || strcmp(argv[0], "_shutdown") == 0 ||
	    strcmp(argv[0], "_interrupt") == 0)
		return talk(argv[0], argc, argv);
	cli_error(NULL, "unknown internal command \"%s\"", argv[0]);
	return EXIT_USAGE;
}
