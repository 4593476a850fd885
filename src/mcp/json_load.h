/* src/mcp/json_load.h — one JSON-RPC message as kbox mcp and its HTTP
 * transport read it. */
#ifndef KBOX_MCP_JSON_LOAD_H
#define KBOX_MCP_JSON_LOAD_H

#include <jansson.h>
#include <stddef.h>

/* json_loadb of BUF[0..LEN) with FLAGS, but a number that is an integer
 * too big for 64 bits (JSON sets no bound; jansson's integers have one)
 * does not make the whole message unreadable, so that its request can be
 * answered by its id: the text is then read with every number as a real,
 * and each real that is a whole number within +-2^53 (exact in a double)
 * is made an integer again.  The big one stays a real, which a field
 * that wants an integer refuses by name.  And an escape of a lone UTF-16
 * surrogate in a string ("\\ud800", which JSON's grammar allows and
 * jansson refuses) is read as U+FFFD.  NULL with ERR as json_loadb (the
 * error of the text with those escapes replaced, when there were any). */
json_t *mcp_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err);

#endif
