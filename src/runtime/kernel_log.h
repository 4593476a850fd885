/* src/runtime/kernel_log.h — the kernel's log (private, the supervisor's).
 *
 * The kernel's standard output and standard error are the write end of a
 * pipe; the supervisor reads the other end in its event loop and copies
 * what comes to the session's kernel.log, which never grows past a bound:
 * before it would, it is renamed kernel.log.1 (replacing the one before)
 * and a new kernel.log begun.  So the kernel holds no descriptor of a host
 * file, and cannot fill the host's disk through its log. */
#ifndef KR_RUNTIME_KERNEL_LOG_H
#define KR_RUNTIME_KERNEL_LOG_H

#include <kbox/error.h>
#include <kbox/loop.h>

/* kernel.log up to 1 MiB, kernel.log.1 the same: 2 MiB together. */
#define KR_KERNEL_LOG_MAX (1LL << 20)

typedef struct kr_kernel_log kr_kernel_log_t;

/* A log kept at PATH (copied), at most MAX bytes in PATH and MAX in
 * PATH.1.  Nothing is opened until there is something to write.  NULL
 * when out of memory. */
kr_kernel_log_t *kr_kernel_log_new(const char *path, long long max);

/* A new pipe for the kernel about to start: its read end is watched on
 * LOOP (borrowed; it must outlive the pipe), its write end is returned
 * (close-on-exec: the kernel's stdout and stderr; the caller closes it
 * once the kernel has it).  The pipe of a kernel before is closed first.
 * -1 with ERR. */
int kr_kernel_log_pipe(kr_kernel_log_t *self, kbox_loop_t *loop, kbox_error_t *err);

/* Copy what the pipe holds now (up to a few pipes full) to the log,
 * without waiting for more. */
void kr_kernel_log_flush(kr_kernel_log_t *self);

/* Flush, then stop watching the pipe and close it: its kernel has ended.
 * Harmless without a pipe. */
void kr_kernel_log_close(kr_kernel_log_t *self);

/* The last LINES lines (at most KR_KERNEL_LOG_TAIL bytes) that the
 * kernel of the current pipe wrote (nothing of a kernel before it), for a
 * message: each indented by two spaces and cut to 200 bytes, joined by
 * newlines, valid UTF-8 without escape sequences or other control
 * characters; into BUF ("" when it wrote nothing).  Flush first for its
 * last words. */
#define KR_KERNEL_LOG_TAIL 4096
void kr_kernel_log_tail(const kr_kernel_log_t *self, int lines, char *buf, size_t size);

/* Close the pipe and the log file, free.  Sets *SELF_P to NULL; accepts
 * NULL. */
void kr_kernel_log_destroy(kr_kernel_log_t **self_p);

#endif
