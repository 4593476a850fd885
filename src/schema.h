/* src/schema.h — JSON Schema (draft 7, the dialect of OpenAI, Anthropic
 * and MCP tool definitions) checked against a value, for the host
 * functions that kernel code calls (issue 21): a function's arguments are
 * checked before anything of the host runs, and what is wrong is said in
 * words a model acts on ("order_id must be a string, got int").
 *
 * The keywords: type, enum, const; properties, required,
 * additionalProperties, patternProperties, propertyNames,
 * minProperties, maxProperties, dependencies; items (one schema or a
 * tuple), additionalItems, contains, minItems, maxItems, uniqueItems;
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers),
 * multipleOf; minLength, maxLength (in code points), pattern (ECMA-262's
 * syntax as POSIX extended regular expressions take it, its class escapes
 * \d \w \s \D \W \S made POSIX classes); allOf,
 * anyOf, oneOf, not, if/then/else; true and false as schemas; $ref to a
 * JSON pointer in the same document ("#", "#/definitions/x",
 * "#/$defs/x").  Annotations (title, description, default, examples,
 * format, $schema, $id, $comment) are read and ignored.  A $ref to
 * another document is refused as a schema error.  Recursion is bounded:
 * a value or a chain of $ref deeper than KBOX__SCHEMA_DEPTH is refused. */
#ifndef KBOX_SCHEMA_H
#define KBOX_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#define KBOX__SCHEMA_DEPTH 64
/* The most work one check does (a step a schema applied, a pair of items
 * compared, a pattern's match a hundred and more): past it, the value is
 * refused as too costly to check. */
#define KBOX__SCHEMA_STEPS 2000000

/* Check VALUE against SCHEMA (a draft 7 schema).  NAME names the value in
 * messages (an argument's name; NULL: "the value").  0 when it is valid;
 * 1 when not, WHY (SIZE bytes) saying the first rule broken, with the
 * path to it ("items[2].sku must be a string, got int"); -1 when the
 * schema itself cannot be used (a keyword of the wrong type, a $ref kbox
 * cannot follow, a pattern that does not compile), WHY saying so. */
int kbox__schema_check(const json_t *schema, const json_t *value, const char *name, char *why,
                       size_t size);

/* Check SCHEMA itself: 0 when every keyword kbox reads has the type
 * draft 7 gives it (in every subschema), each pattern compiles and each
 * $ref leads somewhere in it; else -1 with WHY (SIZE bytes) saying the
 * first thing wrong, with where (a JSON pointer: "/properties/a"). */
int kbox__schema_lint(const json_t *schema, char *why, size_t size);

/* The name a model knows VALUE's type by (Python's, as the kernel sees
 * it): None, bool, int, float, str, list, dict. */
const char *kbox__schema_type_name(const json_t *value);

#endif
