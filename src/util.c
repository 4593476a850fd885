/* src/util.c — small utilities shared by libkbox's modules (declared in
 * src/private.h): one of each. */
#include "private.h"
