/* kbox/kspec.h — kernelspecs: finding kernel.json files and turning them into a command. */
#ifndef KBOX_KSPEC_H
#define KBOX_KSPEC_H

#include <stddef.h>
#include <jansson.h>
#include <kbox/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KBOX_INTERRUPT_SIGNAL = 0, KBOX_INTERRUPT_MESSAGE } kbox_interrupt_mode_t;

typedef struct kbox_kspec kbox_kspec_t;

/* The directories searched for "kernels/<name>/kernel.json", in Jupyter's
 * order, first match wins:
 *   each entry of $JUPYTER_PATH;
 *   the user data dir ($JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter,
 *     else ~/.local/share/jupyter);
 *   PREFIX/share/jupyter for kbox's configured install prefix, unless it is
 *     one of the two below (as jupyter_core treats sys.prefix);
 *   /usr/local/share/jupyter, /usr/share/jupyter.
 * Duplicates are dropped.  Returns a new NULL-terminated array of new
 * strings: kbox_strv_free(p). */
char **kbox_kspec_search_path(void);

/* Free a NULL-terminated array of strings and the strings in it (one of
 * the new arrays above). Accepts NULL. */
void kbox_strv_free(char **strv);

/* Find kernelspec NAME (case-insensitive; letters, digits, '.', '_', '-')
 * on the search path.  KBOX_E_NOTFOUND lists where it looked.  New:
 * kbox_kspec_destroy(&p); NULL with ERR. */
kbox_kspec_t *kbox_kspec_find(const char *name, kbox_error_t *err);

/* Load the kernelspec in directory DIR (which holds kernel.json); its name is
 * the directory's last component.  New: kbox_kspec_destroy(&p); NULL with
 * ERR. */
kbox_kspec_t *kbox_kspec_load(const char *dir, kbox_error_t *err);

/* Names of all kernelspecs found, each with the directory that wins for it:
 * a NULL-terminated array of "name\tdir" strings, sorted by name.  New:
 * kbox_strv_free(p). */
char **kbox_kspec_list(void);

/* A kernelspec from its kernel.json as JSON (SPEC, borrowed): one a
 * remote Jupyter server lists (GET /api/kernelspecs/NAME's "spec").  Its
 * resource directory is "" (none here).  New: kbox_kspec_destroy(&p);
 * NULL with ERR. */
kbox_kspec_t *kbox_kspec_from_json(const char *name, const json_t *spec, kbox_error_t *err);
void kbox_kspec_destroy(kbox_kspec_t **self_p);

/* Borrowed views, valid while SELF lives. */
const char *kbox_kspec_name(const kbox_kspec_t *self);
const char *kbox_kspec_resource_dir(const kbox_kspec_t *self);
const char *kbox_kspec_display_name(const kbox_kspec_t *self);
const char *kbox_kspec_language(const kbox_kspec_t *self);
kbox_interrupt_mode_t kbox_kspec_interrupt_mode(const kbox_kspec_t *self);
/* argv as written in kernel.json, NULL-terminated. */
char *const *kbox_kspec_argv(const kbox_kspec_t *self);
/* "env" object (string values) and "metadata" object; {} when absent. */
json_t *kbox_kspec_env(const kbox_kspec_t *self);
json_t *kbox_kspec_metadata(const kbox_kspec_t *self);

/* The command to run: argv with "{connection_file}" (made absolute),
 * "{resource_dir}" and "{prefix}" replaced (unknown "{names}" left as they
 * are).  "{prefix}" is /usr, the sys.prefix of Debian's Python, which is
 * what jupyter_client run by that Python substitutes.  New:
 * kbox_strv_free(p); NULL with ERR. */
char **kbox_kspec_format_argv(const kbox_kspec_t *self, const char *connection_file,
                              kbox_error_t *err);

/* The spec's env as "KEY=VALUE" strings with "${VAR}" replaced from the
 * current environment (unset → empty).  New: kbox_strv_free(p). */
char **kbox_kspec_format_env(const kbox_kspec_t *self);

#ifdef __cplusplus
}
#endif
#endif
