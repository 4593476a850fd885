/* src/runtime/session_config.h — session.json: a session's configuration,
 * its defaults, and the one reader and the one writer of the file.
 *
 * kbox start, kbox run and the auto-start of kbox exec (and so of kbox mcp
 * and kbox agent) write it; the supervisor reads it when it starts; kbox ls
 * and kbox mcp read it too.  The file is a JSON object with the keys of
 * kr_session_key_t, each of one type; any other key, or a key of another
 * type, makes it invalid (the error names the key).  Every key that any
 * kbox ever wrote is one of these, with the type it was written with, so
 * a session.json an older kbox left in the state directory loads.
 *
 * A configuration holds the value of every key: the session's own (read
 * from the file, or given on a command line: its bit in HAS), else the
 * default.  Saving writes the session's own keys, and always "kernel" and
 * "backend" (kbox(1), FILES). */
#ifndef KR_RUNTIME_SESSION_CONFIG_H
#define KR_RUNTIME_SESSION_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <jansson.h>
#include <kbox/error.h>
#include "runtime/backend.h" /* KR_BACKEND_DEFAULT */

/* The default kernelspec. */
#define KR_KERNEL_DEFAULT "python3"
/* Default idle time after which a supervisor stops its session. */
#define KR_SESSION_TTL_MS (30LL * 60 * 1000)
/* Default outputs quota: the most a session's outputs/ may hold (spill
 * files and images); kbox start --outputs-quota. */
#define KR_OUTPUTS_QUOTA (1LL << 30)

/* The keys of session.json, one bit each. */
typedef enum {
	KR_SC_NAME = 1u << 0,            /* "name": string */
	KR_SC_KERNEL = 1u << 1,          /* "kernel": string, a kernelspec */
	KR_SC_BACKEND = 1u << 2,         /* "backend": string */
	KR_SC_TTL_MS = 1u << 3,          /* "ttl_ms": integer >= 0 */
	KR_SC_MEMORY = 1u << 4,          /* "memory": integer >= 0, bytes */
	KR_SC_CPUS = 1u << 5,            /* "cpus": number >= 0 */
	KR_SC_PIDS = 1u << 6,            /* "pids": integer >= 0 */
	KR_SC_TMP_SIZE = 1u << 7,        /* "tmp_size": integer >= 0, bytes */
	KR_SC_FILE_SIZE = 1u << 8,       /* "file_size": integer >= 0, bytes */
	KR_SC_OUTPUTS_QUOTA = 1u << 9,   /* "outputs_quota": integer >= 0, bytes */
	KR_SC_HOME_CONFIG = 1u << 10,    /* "home_config": true or false */
	KR_SC_ROOTFS = 1u << 11,         /* "rootfs": string, an absolute path */
	KR_SC_ENV = 1u << 12,            /* "env": array of "NAME=VALUE" strings */
	KR_SC_WORKSPACE = 1u << 13,      /* "workspace": string (kbox run --workspace) */
	KR_SC_WORKSPACE_DEV = 1u << 14,  /* "workspace_dev": integer */
	KR_SC_WORKSPACE_INO = 1u << 15,  /* "workspace_ino": integer */
	KR_SC_EPHEMERAL = 1u << 16,      /* "ephemeral": true or false (kbox run) */
	KR_SC_OWNER_PID = 1u << 17,      /* "owner_pid": integer >= 0 (kbox run) */
	KR_SC_OUTPUT_RATE = 1u << 18,    /* "output_rate": integer >= 0, messages a second */
	KR_SC_IMAGE = 1u << 19,          /* "image": string (backend docker) */
	KR_SC_ENGINE = 1u << 20,         /* "engine": string, unix:///PATH (backend docker) */
	KR_SC_FUNCTIONS = 1u << 21,      /* "functions": string, a functions file as read,
	                                 * as JSON text (kr_functions_text: its order and
	                                 * numbers as they were) */
	KR_SC_RELAY = 1u << 22,          /* "relay": string, a front end's connection file
	                                 * as JSON text (kbox kernel) */
	KR_SC_WORKSPACE_RO = 1u << 23,   /* "workspace_ro": true or false */
	KR_SC_GATEWAY = 1u << 24,        /* "gateway": string, a Jupyter server's URL
	                                 * (backend gateway) */
	KR_SC_GATEWAY_CA = 1u << 25,     /* "gateway_ca": string, an absolute path */
	KR_SC_LAUNCH_TIMEOUT = 1u << 26, /* "launch_timeout": integer >= 0, s */
} kr_session_key_t;

/* A session's configuration.  The strings of the keys in HAS are owned
 * (kr_session_config_free frees them); those of the others are the
 * defaults (static) or NULL.  Read the fields; change them only through
 * kr_session_config_merge. */
typedef struct {
	unsigned has;        /* the session's own keys: KR_SC_* bits */
	const char *name;    /* NULL: none stored */
	const char *kernel;  /* KR_KERNEL_DEFAULT */
	const char *backend; /* KR_BACKEND_DEFAULT */
	long long ttl_ms;    /* KR_SESSION_TTL_MS; 0: never idle-stopped */
	/* limits: 0 for the backend's default (kr_sandbox_opts_t) */
	long long memory; /* bytes */
	double cpus;
	long long pids;
	long long tmp_size;      /* bytes of /tmp and /dev/shm */
	long long file_size;     /* the largest file the kernel may write */
	long long outputs_quota; /* KR_OUTPUTS_QUOTA (a stored 0 means it too) */
	long long output_rate;   /* output messages a second once it cannot be kept on
	                          * disk; 0: KBOX_RATE_MSGS_PER_SEC */
	bool home_config;        /* false: a new kernel skips its home's startup files */
	const char *rootfs;      /* NULL: the host's system files */
	const char *image;       /* docker: NULL: kbox-kernel */
	const char *engine; /* docker: the engine's socket; NULL: DOCKER_HOST's, or the default */
	char **env;         /* "NAME=VALUE", N_ENV of them, NULL-terminated; NULL: none */
	size_t n_env;
	/* kbox run: a host directory as the workspace, with the identity
	 * (WORKSPACE_DEV, WORKSPACE_INO: HAS says whether stored) it had
	 * when it was checked; NULL: the session's own DIR/workspace */
	const char *workspace;
	long long workspace_dev, workspace_ino;
	bool ephemeral;      /* the session's directory goes when it stops */
	long long owner_pid; /* the session stops when this process ends; 0: none */
	/* host functions (kbox-functions(5)): the file as kbox start read
	 * it, its commands' paths made absolute, as JSON text
	 * (kr_functions_text); NULL: none */
	const char *functions;
	/* kbox kernel: the front end's connection (a Jupyter connection file,
	 * its key included, as JSON text) whose sockets the supervisor binds
	 * and relays to the kernel's (kbox/relay.h); NULL: none */
	const char *relay;
	bool workspace_ro; /* the workspace is bound read-only */
	/* gateway: the Jupyter server's URL (NULL: none), the CA file that
	 * verifies it (NULL: the system's), how long a kernel may take to
	 * start (s; 0: KG_LAUNCH_TIMEOUT_S).  Its token is no key of this
	 * file: KR_GATEWAY_TOKEN_FILE beside it. */
	const char *gateway, *gateway_ca;
	long long launch_timeout;
} kr_session_config_t;

/* The gateway's token, beside session.json (0600). */
#define KR_GATEWAY_TOKEN_FILE "gateway-token"
/* ... and the directory on the server its kernel works in (kr_gateway_dir). */
#define KR_GATEWAY_DIR_FILE "gateway-dir"

/* What a command line gives, to merge over a configuration: strings
 * borrowed (NULL: not given), numbers -1 and tri-states -1 when not given
 * (start from KR_SESSION_OPTS_INIT).  ENV (N_ENV strings; 0: not given)
 * replaces the session's whole environment.  WORKSPACE_ST, given with
 * WORKSPACE, is the directory as checked: its device and inode are stored. */
typedef struct {
	const char *name, *kernel, *backend, *rootfs, *workspace, *image, *engine, *gateway,
	        *gateway_ca;
	long long ttl_ms, memory, pids, tmp_size, file_size, outputs_quota, output_rate, owner_pid,
	        launch_timeout;
	double cpus;
	int home_config, ephemeral, workspace_ro; /* -1, 0 or 1 */
	const char *const *env;
	size_t n_env;
	const struct stat *workspace_st;
	const char *functions; /* a functions file as read, as JSON text (NULL: not given) */
	const char *relay;     /* a front end's connection, as JSON text (NULL: not given) */
} kr_session_opts_t;

#define KR_SESSION_OPTS_INIT                                                                 \
	{                                                                                    \
		.ttl_ms = -1, .memory = -1, .pids = -1, .tmp_size = -1, .file_size = -1,     \
		.outputs_quota = -1, .output_rate = -1, .owner_pid = -1, .cpus = -1,         \
		.launch_timeout = -1, .home_config = -1, .ephemeral = -1, .workspace_ro = -1 \
	}

/* Whether REF is a container image reference an engine takes: NAME,
 * NAME:TAG, NAME@sha256:DIGEST (NAME: [REGISTRY/]PATH, lower-case path
 * components), or sha256:ID; at most 255 bytes. */
bool kr_image_ref_valid(const char *ref);
/* Whether VALUE names an engine's socket kbox can use: unix:///PATH or
 * /PATH, absolute, at most 107 bytes (a unix socket's), printable. */
bool kr_engine_socket_valid(const char *value);
/* Whether URL is a Jupyter server's URL the gateway takes: http:// or
 * https://, a host (an IPv6 one in brackets), a port from 1 to 65535 if
 * any, no user, query or fragment (a token in a URL ends up in logs),
 * printable, at most 1024 bytes. */
bool kr_gateway_url_valid(const char *url);

/* Whether a kernelspec's METADATA (borrowed; may be NULL) says it is one
 * of kbox's own, whose command is kbox kernel (kbox kernelspec install,
 * kernelspec/kbox-python3): "metadata": {"kbox": {"runs": {"kernel": …,
 * "backend": …}}}.  (metadata.kbox's other members are a kernelspec's
 * settings for kbox, such as ro_bind.) */
bool kr_kspec_is_kbox(const json_t *metadata);

/* Fill CFG with the defaults: no key of its own.  Never fails; CFG needs
 * no kr_session_config_free after (it does no harm). */
void kr_session_config_init(kr_session_config_t *cfg);

/* Read DIR/session.json into CFG: an absent file is the defaults (but,
 * run by an ordinary user, where kbox recorded a seal of one: removed
 * since, refused).  Refuses
 * what is not a JSON object, a duplicate key, an unknown key (ERR names
 * every one), a value of the wrong type (ERR names the key and the type it
 * takes), and, run by an ordinary user, a file whose seal is missing or
 * does not match (session_config.c: code of a sandbox of the same uid
 * that reached the state directory may have written it).  0, or -1 with
 * ERR (KBOX_E_INVALID; may be NULL), CFG then holding the defaults.
 * Either way, free CFG after. */
int kr_session_config_load(kr_session_config_t *cfg, const char *dir, kbox_error_t *err);

/* kr_session_config_load of DIR held open as DIR_FD (O_PATH will do):
 * the file is read from it, through no link, whatever is at DIR's path
 * now (the supervisor's). */
int kr_session_config_load_at(kr_session_config_t *cfg, int dir_fd, const char *dir,
                              kbox_error_t *err);

/* The longest TTL a session.json may hold, as the command line's
 * longest duration: 24 days. */
#define KR_SESSION_TTL_MAX_MS (24LL * 86400000)

/* The most bytes a session.json may have: kbox's are a few hundred. */
#define KR_SESSION_CONFIG_MAX (1 << 20)

/* Seal DIR/session.json as it is, whatever its seal says (kbox start
 * --reseal): read once, unchecked, into CFG, and saved from CFG, so that
 * what the caller shows of CFG is what was sealed.  0 (also when there is
 * no file), or -1 with ERR.  Either way, free CFG after. */
int kr_session_config_reseal(const char *dir, kr_session_config_t *cfg, kbox_error_t *err);

/* CFG as session.json holds it: its own keys, "kernel" and "backend"
 * always.  A new reference, NULL when out of memory. */
json_t *kr_session_config_to_json(const kr_session_config_t *cfg);

/* Write CFG to DIR/session.json, atomically: into a new file of a random
 * name in DIR (mode 0600, O_EXCL), flushed to disk, then renamed over
 * session.json; sealed when run by an ordinary user (the user's key made
 * first when there is none).  0, or -1 with ERR (may be NULL). */
int kr_session_config_save(const kr_session_config_t *cfg, const char *dir, kbox_error_t *err);

/* Give CFG each key OPTS gives (the command line over the file over the
 * defaults), as the session's own.  0, or -1 with ERR when out of memory
 * (CFG then partly merged, still valid). */
int kr_session_config_merge(kr_session_config_t *cfg, const kr_session_opts_t *opts,
                            kbox_error_t *err);

/* Whether OPTS gives no key at all. */
bool kr_session_opts_empty(const kr_session_opts_t *opts);

/* Free what CFG owns; it holds the defaults again.  Accepts NULL. */
void kr_session_config_free(kr_session_config_t *cfg);

#endif
