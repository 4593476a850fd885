/* src/gateway/gateway_int.h — what kbox-gateway's files share (prefix
 * kg_): its status lines, its standard input, and the subcommands on
 * files (files.c). */
#ifndef KBOX_GATEWAY_INT_H
#define KBOX_GATEWAY_INT_H

#include "gateway/gw.h"

#include <jansson.h>
#include <stdbool.h>

/* J (taken) as one compact line on FD. */
void kg_say(int fd, json_t *j);
/* ERR as {"error": ...} on FD.  1 (the exit status). */
int kg_say_error(int fd, const gw_error_t *err);
/* TEXT as a JSON string, its invalid UTF-8 repaired. */
json_t *kg_jtext(const char *text);
/* A line of standard input as a JSON object, or NULL. */
json_t *kg_read_line_json(void);
/* The server of standard input's first line, or NULL with ERR. */
gw_t *kg_server_from_stdin(gw_error_t *err);
/* Whether ID may be a kernel's id (letters, digits, '-', '_'). */
bool kg_id_valid(const char *id);
/* Whether the URL of G has no Jupyter API under it (GET /api/kernelspecs
 * answers 404: a wrong path), said in ERR as KIND when so. */
bool kg_no_api(gw_t *g, gw_kind_t kind, gw_error_t *err);

/* ---- files.c ---- */

/* Whether the server has a contents API: 0, or -1 with ERR (kind
 * GW_E_NO_CONTENTS when it has none: a Kernel or Enterprise Gateway). */
int kg_contents_probe(gw_t *g, gw_error_t *err);
/* Make the directory PATH (an API path) and its parents.  0, or -1. */
int kg_make_dirs(gw_t *g, const char *path, gw_error_t *err);
/* Whether PATH is an API path kbox-gateway takes: relative, no "." or
 * ".." or empty component, no control character. */
bool kg_path_valid(const char *path);
/* Why PATH is not one kg_path_valid takes (a sentence for a message), or
 * NULL when it is. */
const char *kg_path_refused(const char *path);

int kg_cmd_put(const char *dir, const char *rel, const char *fd, const char *name);
int kg_cmd_get(const char *dir, const char *rel, const char *fd, const char *max,
               const char *since);
int kg_cmd_list(const char *dir, const char *rel);

#endif
