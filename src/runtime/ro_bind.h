/* src/runtime/ro_bind.h — what of the host a kernel's installation needs
 * in the bwrap sandbox beyond /usr: read-only binds, found from the
 * symlinks of its install tree or asked for by its kernelspec
 * (metadata.kbox.ro_bind), each checked against what must never be bound
 * (kbox(7), SANDBOX).  Runtime, not installed: used by the bwrap backend. */
#ifndef KR_RUNTIME_RO_BIND_H
#define KR_RUNTIME_RO_BIND_H

#include <stddef.h>
#include <kbox/error.h>
#include <kbox/kspec.h>

/* At most this many binds for one kernel; a directory bound is checked
 * entry by entry, down to RO_BIND_DEPTH levels and RO_BIND_ENTRIES
 * entries (a larger one is refused). */
#define KR_RO_BIND_MAX 32
#define KR_RO_BIND_DEPTH 8
#define KR_RO_BIND_ENTRIES 4096

/* Check PATH (absolute, no "..") as a read-only bind into the sandbox
 * whose system files come from ROOT (NULL or "": the host's).  The bind
 * is refused when PATH is not strictly below /etc, /opt or /srv; names
 * one of the sandbox's own /etc files (passwd, group, hosts, hostname,
 * nsswitch.conf); resolves (in ROOT) to anything but a regular file or
 * directory below /etc, /opt, /srv or /usr; lies in, or holds, one of
 * DENY (NULL-terminated host directories: kbox's state directory, the
 * session's), a home directory of /etc/passwd or $HOME; has a name that
 * looks secret (shadow, secret, private, passw, token, credential,
 * keytab, sudoers, ssh, gnupg, security, *.key); or is, or holds, a file
 * or directory that not every user may read.
 *
 * 1 with DEST (PATH as the sandbox is to see it) and SRC (the host's file)
 * in buffers of SIZE bytes; 0 when the sandbox shows PATH already (under
 * /usr, or an /etc file it binds itself); -1 with ERR, which says why. */
int kr_ro_bind_check(const char *root, const char *path, const char *const *deny, char *dest,
                     char *src, size_t size, kbox_error_t *err);

/* The read-only binds that the kernel SPEC runs as EXE (its argv[0] as
 * the sandbox finds it) needs, as pairs "host path", "path inside",
 * NULL-terminated (kbox_strv_free): every path of SPEC's
 * metadata.kbox.ro_bind, which must pass kr_ro_bind_check; then the
 * targets outside the sandbox of the symlinks in EXE's installation — the
 * directory of EXE's real path unless all programs share it (/usr/bin,
 * /usr/local/bin, /bin and their sbin), and PREFIX/lib/NAME and
 * PREFIX/lib64/NAME down to two levels when that directory is PREFIX/bin
 * and the program's NAME (/usr/lib/R for /usr/bin/R) — those that pass
 * it (the others are left out).  A bind inside another is left out.  NULL with ERR (a
 * refused or malformed metadata.kbox.ro_bind, or out of memory). */
char **kr_ro_bind_find(const char *root, const kbox_kspec_t *spec, const char *exe,
                       const char *const *deny, kbox_error_t *err);

#endif
