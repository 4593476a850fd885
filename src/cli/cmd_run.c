/* src/cli/cmd_run.c — kbox run: run cells, in order, in one fresh local kernel. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#define MAX_CELL_BYTES (64L * 1024 * 1024)

typedef struct {
	char *code;   /* owned */
	char *source; /* "-c", a file name or "-" (borrowed from argv) */
} cell_t;

typedef struct {
	const char *outputs; /* image directory */
	int count;           /* execution count of the running cell */
	int images;          /* images saved for this cell */
	int failed_io;
} run_ctx_t;

/* Read all of F (at most MAX_CELL_BYTES). NULL with errno on failure. */
static char *slurp(FILE *f)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t r;
		if (n + 1 >= cap) {
			char *nb;
			if (cap >= (size_t)MAX_CELL_BYTES) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				free(buf);
				errno = EIO;
				return NULL;
			}
			buf[n] = '\0';
			return buf;
		}
	}
	return NULL;
}

/* Copy S to F without ANSI escape sequences (CSI, OSC and two-byte ones). */
static void put_plain(FILE *f, const char *s)
{
	while (*s) {
		if (*s != '\033') {
			fputc(*s++, f);
			continue;
		}
		s++;
		if (*s == '[') { /* CSI: parameters, then a final byte 0x40-0x7e */
			s++;
			while (*s && !(*s >= 0x40 && *s <= 0x7e))
				s++;
			if (*s)
				s++;
		} else if (*s == ']') { /* OSC: until BEL or ESC \ */
			s++;
			while (*s && *s != '\a' && !(*s == '\033' && s[1] == '\\'))
				s++;
			if (*s == '\a')
				s++;
			else if (*s)
				s += 2;
		} else if (*s) {
			s++;
		}
	}
}

static const char *text_plain(json_t *content)
{
	json_t *t = json_object_get(json_object_get(content, "data"), "text/plain");
	return json_is_string(t) ? json_string_value(t) : NULL;
}

/* Write one image of DATA (a MIME bundle) to the outputs dir; print where.
 * Returns 1 if an image was found, 0 if not. */
static int save_image(run_ctx_t *rc, json_t *data)
{
	static const struct {
		const char *mime, *ext;
		bool base64;
	} kinds[] = {{"image/png", "png", true}, {"image/jpeg", "jpg", true}, {"image/svg+xml", "svg", false}};

	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		json_t *v = json_object_get(data, kinds[k].mime);
		const char *s;
		size_t len, outlen = 0;
		unsigned char *bytes;
		char path[PATH_MAX];
		int fd;

		if (!json_is_string(v))
			continue;
		s = json_string_value(v);
		len = json_string_length(v);
		if (kinds[k].base64) {
			bytes = malloc(len / 4 * 3 + 3);
			if (!bytes || sodium_base642bin(bytes, len / 4 * 3 + 3, s, len, "\n\r ", &outlen,
			                                NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
				free(bytes);
				fprintf(stderr, "kbox run: %s output is not valid base64; not saved\n",
				        kinds[k].mime);
				return 1;
			}
		} else {
			bytes = (unsigned char *)strdup(s);
			outlen = len;
			if (!bytes)
				return 1;
		}
		snprintf(path, sizeof path, "%s/%d-%d.%s", rc->outputs, rc->count < 0 ? 0 : rc->count,
		         ++rc->images, kinds[k].ext);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, bytes, outlen) != (ssize_t)outlen) {
			fprintf(stderr, "kbox run: cannot write %s: %s\n", path, strerror(errno));
			rc->failed_io = 1;
		} else {
			printf("[image saved: %s]\n", path);
		}
		if (fd >= 0)
			close(fd);
		free(bytes);
		return 1;
	}
	return 0;
}

/* Print each iopub message of the running cell as it arrives. */
static int on_msg(void *arg, kbox_channel_t ch, const kbox_msg_t *msg)
{
	run_ctx_t *rc = arg;
	const char *type = kbox_msg_type(msg);
	json_t *c = kbox_msg_content(msg);

	if (ch != KBOX_CH_IOPUB)
		return 0;
	if (strcmp(type, "execute_input") == 0) {
		json_t *n = json_object_get(c, "execution_count");
		if (json_is_integer(n))
			rc->count = (int)json_integer_value(n);
	} else if (strcmp(type, "stream") == 0) {
		json_t *name = json_object_get(c, "name"), *text = json_object_get(c, "text");
		if (json_is_string(text)) {
			bool err = json_is_string(name) && strcmp(json_string_value(name), "stderr") == 0;
			FILE *f = err ? stderr : stdout;
			fwrite(json_string_value(text), 1, json_string_length(text), f);
			fflush(f);
		}
	} else if (strcmp(type, "execute_result") == 0) {
		const char *t = text_plain(c);
		json_t *n = json_object_get(c, "execution_count");
		if (!save_image(rc, json_object_get(c, "data")) && t)
			printf("Out[%d]: %s\n", json_is_integer(n) ? (int)json_integer_value(n) : rc->count, t);
		fflush(stdout);
	} else if (strcmp(type, "display_data") == 0 || strcmp(type, "update_display_data") == 0) {
		const char *t = text_plain(c);
		if (!save_image(rc, json_object_get(c, "data")) && t)
			printf("%s\n", t);
		fflush(stdout);
	} else if (strcmp(type, "error") == 0) {
		json_t *tb = json_object_get(c, "traceback"), *line;
		size_t i;
		fflush(stdout);
		if (json_is_array(tb) && json_array_size(tb) > 0) {
			json_array_foreach(tb, i, line) {
				if (json_is_string(line)) {
					put_plain(stderr, json_string_value(line));
					fputc('\n', stderr);
				}
			}
		} else {
			json_t *en = json_object_get(c, "ename"), *ev = json_object_get(c, "evalue");
			fprintf(stderr, "%s: %s\n", json_is_string(en) ? json_string_value(en) : "Error",
			        json_is_string(ev) ? json_string_value(ev) : "");
		}
		fflush(stderr);
	}
	return 0;
}

/* Parse SECONDS ("2", "0.5"); -1 when invalid. */
static long parse_timeout_ms(const char *s)
{
	char *end;
	double v;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 86400.0 * 365)
		return -1;
	return (long)ceil(v * 1000);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kernel", required_argument, NULL, 'k'}, {"cwd", required_argument, NULL, 'C'},
	    {"timeout", required_argument, NULL, 't'}, {"outputs", required_argument, NULL, 'o'},
	    {"input", required_argument, NULL, 'i'},  {"code", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	const cli_cmd_t *self = cli_find("run");
	const char *kernel = getenv("KBOX_KERNEL"), *cwd = NULL, *outputs = NULL;
	const char **inputs = NULL;
	size_t n_inputs = 0, n_cells = 0, used_inputs = 0;
	cell_t *cells = NULL;
	long timeout_ms = 0;
	int c, status = EXIT_OK;
	kbox_kspec_t *spec = NULL;
	kbox_kernel_t *k = NULL;
	kbox_client_t *client = NULL;
	kbox_error_t err = {0};
	char cwdbuf[PATH_MAX];
	bool used_stdin = false;

	if (!kernel || !*kernel)
		kernel = "python3";
	inputs = calloc((size_t)argc + 1, sizeof *inputs);
	cells = calloc((size_t)argc + 1, sizeof *cells);
	if (!inputs || !cells) {
		cli_error("run", "out of memory");
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "-:k:C:t:o:i:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'k': kernel = optarg; break;
		case 'C': cwd = optarg; break;
		case 'o': outputs = optarg; break;
		case 'i': inputs[n_inputs++] = optarg; break;
		case 't':
			timeout_ms = parse_timeout_ms(optarg);
			if (timeout_ms < 0) {
				cli_error("run", "invalid --timeout \"%s\": expected seconds (e.g. 30 or 0.5)",
				          optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'c':
			cells[n_cells].source = "-c";
			if (!(cells[n_cells++].code = strdup(optarg))) {
				cli_error("run", "out of memory");
				status = EXIT_UNAVAILABLE;
				goto out;
			}
			break;
		case 1: {
			FILE *f;
			bool is_stdin = strcmp(optarg, "-") == 0;
			if (is_stdin && used_stdin) {
				cli_error("run", "standard input (-) given more than once");
				status = EXIT_USAGE;
				goto out;
			}
			used_stdin |= is_stdin;
			f = is_stdin ? stdin : fopen(optarg, "r");
			cells[n_cells].source = optarg;
			if (!f || !(cells[n_cells].code = slurp(f))) {
				cli_error("run", "cannot read %s: %s", is_stdin ? "standard input" : optarg,
				          strerror(errno));
				if (f && !is_stdin)
					fclose(f);
				status = EXIT_USAGE;
				goto out;
			}
			if (!is_stdin)
				fclose(f);
			n_cells++;
			break;
		}
		case 'h': cli_usage(self, stdout); goto out;
		default:
			cli_bad_option("run", c, argv);
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (n_cells == 0) {
		cli_error("run", "no code to run: give -c CODE, a FILE or - (see kbox run --help)");
		status = EXIT_USAGE;
		goto out;
	}
	if (!cwd) {
		if (!getcwd(cwdbuf, sizeof cwdbuf)) {
			cli_error("run", "cannot read the current directory: %s", strerror(errno));
			status = EXIT_USAGE;
			goto out;
		}
		cwd = cwdbuf;
	} else if (access(cwd, X_OK) < 0) {
		cli_error("run", "--cwd %s: %s", cwd, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}
	if (!outputs)
		outputs = cwd;
	else if (access(outputs, W_OK | X_OK) < 0) {
		cli_error("run", "--outputs %s: %s", outputs, strerror(errno));
		status = EXIT_USAGE;
		goto out;
	}

	spec = kbox_kspec_find(kernel, &err);
	if (!spec) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	fprintf(stderr, "kbox: warning: backend none: the kernel runs unsandboxed\n");
	{
		kbox_kernel_opts_t ko = {0};
		ko.cwd = cwd;
		k = kbox_kernel_start_ready(spec, &ko, 60000, &client, &err);
	}
	if (!k) {
		cli_error("run", "%s", err.msg);
		status = EXIT_UNAVAILABLE;
		goto out;
	}
	for (size_t i = 0; i < n_cells && status == EXIT_OK; i++) {
		run_ctx_t rc = {outputs, -1, 0, 0};
		kbox_exec_opts_t eo = {0};
		kbox_exec_t *x;

		eo.code = cells[i].code;
		eo.timeout_ms = (int)(timeout_ms > INT_MAX ? INT_MAX : timeout_ms);
		eo.interrupt_on_timeout = true;
		eo.on_msg = on_msg;
		eo.cb_arg = &rc;
		if (n_inputs) { /* the lines answer input() across cells */
			eo.input_lines = inputs + used_inputs;
			eo.n_input = n_inputs - used_inputs;
		}
		x = kbox_client_execute(client, &eo, &err);
		if (!x) {
			cli_error("run", "%s", err.msg);
			status = EXIT_DIED;
			break;
		}
		used_inputs += kbox_exec_inputs_answered(x);
		if (used_inputs > n_inputs)
			used_inputs = n_inputs;
		switch (kbox_exec_status(x)) {
		case KBOX_EXEC_OK: break;
		case KBOX_EXEC_ERROR: status = EXIT_CODE_ERROR; break;
		case KBOX_EXEC_ABORTED:
			cli_error("run", "cell %zu (%s): %s", i + 1, cells[i].source, kbox_exec_reason(x));
			status = EXIT_CODE_ERROR;
			break;
		case KBOX_EXEC_TIMEOUT:
			cli_error("run", "cell %zu (%s): %s", i + 1, cells[i].source, kbox_exec_reason(x));
			status = EXIT_TIMEOUT;
			break;
		case KBOX_EXEC_DIED:
			cli_error("run", "cell %zu (%s): %s; its state is lost", i + 1, cells[i].source,
			          kbox_exec_reason(x));
			status = EXIT_DIED;
			break;
		}
		if (status == EXIT_OK && rc.failed_io)
			status = EXIT_CODE_ERROR;
		kbox_exec_destroy(&x);
	}
	fflush(stdout);
	if (kbox_kernel_stop(k, status == EXIT_DIED ? NULL : client, &err) < 0)
		cli_error("run", "%s", err.msg);
out:
	kbox_client_destroy(&client);
	kbox_kernel_destroy(&k);
	kbox_kspec_destroy(&spec);
	for (size_t i = 0; cells && i < n_cells; i++)
		free(cells[i].code);
	free(cells);
	free(inputs);
	return status;
}
