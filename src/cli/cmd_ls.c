/* src/cli/cmd_ls.c — kbox ls: the sessions and their state. */
#include "config.h"
#include "cli.h"
#include "engine/engine_proto.h"
#include "runtime/ws_live.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* The members of a session's status, in the order kbox status prints
 * them, and kbox ls and status give them in JSON. */
const char *const cli_session_keys[] = {"name",
                                        "state",
                                        "backend",
                                        "kernel",
                                        "pid",
                                        "kernel_pid",
                                        "sandbox_uid",
                                        "container",
                                        "image",
                                        "engine",
                                        "remote_kernel",
                                        "server",
                                        "remote_dir",
                                        "started",
                                        "uptime_s",
                                        "kernel_uptime_s",
                                        "last_activity",
                                        "idle_s",
                                        "executions",
                                        "running_execs",
                                        "queued",
                                        "output_waiting",
                                        "restarts",
                                        "last_restart_cause",
                                        "memory_bytes",
                                        "limits",
                                        "limits_missing",
                                        "ttl_ms",
                                        "last_stop",
                                        "error",
                                        "dir",
                                        NULL};

/* INFO's members in the order of cli_session_keys, then the rest as they
 * came: a new object (INFO is taken). */
static json_t *ordered(json_t *info)
{
	json_t *o = json_object(), *v;
	const char *key;
	for (size_t i = 0; o && cli_session_keys[i]; i++)
		if ((v = json_object_get(info, cli_session_keys[i])))
			json_object_set(o, cli_session_keys[i], v);
	json_object_foreach(info, key, v) if (o && !json_object_get(o, key))
	        json_object_set(o, key, v);
	json_decref(info);
	return o;
}

/* One session as JSON: {"name", "state", …status when running}.  One
 * that is not running and whose session.json is not valid is "invalid",
 * with the reason in "error". */
json_t *cli_session_info(const char *home, const char *name)
{
	kbox_error_t err = {0};
	char *dir = kr_session_dir(home, name, false, &err);
	json_t *info = NULL;
	kr_session_config_t cfg;
	pid_t pid = 0;
	kr_supervisor_state_t st;

	if (!dir)
		return json_pack("{s:s, s:s, s:s}", "name", name, "state", "invalid", "error",
		                 err.msg);
	st = kr_session_supervisor(dir, &pid);
	if (st == KR_SUPERVISOR_RUNNING) {
		info = kr_ctl_call(dir, KR_CTL_OP_STATUS, NULL, 5000, &err);
		if (!info && err.code == KBOX_E_NOTFOUND) /* it closed its socket: stopping */
			info = json_pack("{s:s}", "state", "stopping");
		else if (!info)
			info = json_pack("{s:s, s:s}", "state", "unresponsive", "error", err.msg);
		json_object_del(info, "ok");
		json_object_del(info, "re");
		json_object_set_new(info, "pid", json_integer(pid));
	} else {
		char path[PATH_MAX], buf[512] = "";
		int fd = -1;
		/* (kept where no sandbox reaches: kr_live_session_path) */
		if (kr_live_session_path(dir, KR_LIVE_LAST_STOP, false, path, sizeof path, NULL) ==
		            0 &&
		    (fd = kx_open_file(AT_FDCWD, path, O_RDONLY, 0)) >= 0) {
			ssize_t n = kx_pread_full(fd, buf, sizeof buf - 1, 0);
			buf[n > 0 ? n : 0] = '\0';
			close(fd);
		}
		info = json_pack("{s:s}", "state", st == KR_SUPERVISOR_DEAD ? "dead" : "stopped");
		if (st == KR_SUPERVISOR_DEAD)
			json_object_set_new(
			        info, "last_stop",
			        json_string("the supervisor died without stopping the session"));
		else if (buf[0])
			json_object_set_new(info, "last_stop", json_string(buf));
		if (pid)
			json_object_set_new(info, "pid", json_integer(pid));
		if (kr_session_config_load(&cfg, dir, &err) == 0) {
			if (cfg.has & KR_SC_BACKEND)
				json_object_set_new(info, "backend", json_string(cfg.backend));
			if (cfg.has & KR_SC_KERNEL)
				json_object_set_new(info, "kernel", json_string(cfg.kernel));
			/* a docker session's image and engine, as a running one says */
			if ((cfg.has & KR_SC_BACKEND) && strcmp(cfg.backend, "docker") == 0) {
				const char *e = cfg.has & KR_SC_ENGINE && *cfg.engine
				                        ? cfg.engine
				                        : KE_DEFAULT_SOCKET;
				json_object_set_new(info, "image",
				                    json_string(cfg.has & KR_SC_IMAGE && *cfg.image
				                                        ? cfg.image
				                                        : KE_IMAGE_DEFAULT));
				json_object_set_new(
				        info, "engine",
				        json_string(strncmp(e, "unix://", 7) ? e : e + 7));
			}
			/* a gateway session's server, and its directory there once
			 * it has one: where kbox put and get reach while it is
			 * stopped (review 23, P11) */
			if ((cfg.has & KR_SC_BACKEND) && strcmp(cfg.backend, "gateway") == 0) {
				char rdir[300];
				if ((cfg.has & KR_SC_GATEWAY) && cfg.gateway && *cfg.gateway)
					json_object_set_new(info, "server",
					                    json_string(cfg.gateway));
				if (kr_gateway_dir_recorded(dir, rdir, sizeof rdir) == 0)
					json_object_set_new(info, "remote_dir", json_string(rdir));
			}
		} else {
			/* kbox start and exec would refuse it: say so, and why */
			json_object_set_new(info, "state", json_string("invalid"));
			json_object_set_new(info, "error", json_string(err.msg));
		}
		kr_session_config_free(&cfg);
	}
	json_object_set_new(info, "name", json_string(name));
	json_object_set_new(info, "dir", json_string(dir));
	free(dir);
	return ordered(info);
}

int cmd_ls(int argc, char **argv)
{
	format_t format = FMT_TEXT;
	cli_option_t opts[] = {CLI_OPT_FORMAT(&format,
	                                      "text: a table (the default); json: one JSON array; "
	                                      "ndjson: a JSON object a session, one a line"),
	                       CLI_OPT_JSON('j', &format), CLI_OPT_END};
	int status, wname = 20, wstate = 8;
	kbox_error_t err = {0};
	char *home = NULL, **names = NULL;
	size_t n = 0;
	json_t *all = NULL;
	int nargs = cli_parse_options("ls", opts, argc, argv, &status);

	if (nargs < 0)
		return status;
	if ((status = cli_no_operands("ls", nargs, argv)) != EXIT_OK)
		return status;
	all = json_array();
	if (!(home = kr_state_home(&err)) || !(names = kr_session_list(home, &n, &err))) {
		cli_error("ls", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(all, cli_session_info(home, names[i]));
	if (format == FMT_JSON) {
		char *s = json_dumps(all, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
		if (s)
			puts(s);
		cli_json_printed();
		free(s);
		goto out;
	}
	if (format == FMT_NDJSON) {
		for (size_t i = 0; i < n; i++)
			cli_print_json_line(json_incref(json_array_get(all, i)));
		goto out;
	}
	/* the columns as wide as their longest value (a name of 32
	 * characters, the state "unresponsive"), so that rows line up */
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(all, i);
		const char *nm = json_string_value(json_object_get(s, "name"));
		const char *st = json_string_value(json_object_get(s, "state"));
		if (nm && (int)strlen(nm) > wname)
			wname = (int)strlen(nm);
		if (st && (int)strlen(st) > wstate)
			wstate = (int)strlen(st);
	}
	printf("%-*s %-*s %-8s %-10s %8s %9s %9s %6s\n", wname, "NAME", wstate, "STATE", "BACKEND",
	       "KERNEL", "PID", "UPTIME", "IDLE", "EXECS");
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(all, i);
		char up[32] = "-", idle[32] = "-", pid[24] = "-", execs[24] = "-";
		const char *state = json_string_value(json_object_get(s, "state"));
		bool running = json_object_get(s, "uptime_s") != NULL;
		if (running) {
			cli_fmt_secs(json_number_value(json_object_get(s, "uptime_s")), up,
			             sizeof up);
			cli_fmt_secs(json_number_value(json_object_get(s, "idle_s")), idle,
			             sizeof idle);
			snprintf(execs, sizeof execs, "%lld",
			         (long long)json_integer_value(json_object_get(s, "executions")));
		}
		/* a supervisor's that still runs (one that does not answer,
		 * or stops, too: its pid is what kill needs) */
		if ((running || (state && (strcmp(state, "unresponsive") == 0 ||
		                           strcmp(state, "stopping") == 0))) &&
		    json_integer_value(json_object_get(s, "pid")))
			snprintf(pid, sizeof pid, "%lld",
			         (long long)json_integer_value(json_object_get(s, "pid")));
		printf("%-*s %-*s %-8s %-10s %8s %9s %9s %6s\n", wname,
		       json_string_value(json_object_get(s, "name")), wstate, state ? state : "?",
		       json_string_value(json_object_get(s, "backend"))
		               ? json_string_value(json_object_get(s, "backend"))
		               : "-",
		       json_string_value(json_object_get(s, "kernel"))
		               ? json_string_value(json_object_get(s, "kernel"))
		               : "-",
		       pid, up, idle, execs);
	}
out:
	json_decref(all);
	kr_session_list_free(names, n);
	free(home);
	return status;
}
