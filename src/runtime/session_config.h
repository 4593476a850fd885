/* src/runtime/session_config.h — session.json: a session's configuration
 * and its defaults. */
#ifndef KBOX_RUNTIME_SESSION_CONFIG_H
#define KBOX_RUNTIME_SESSION_CONFIG_H

#include "runtime/backend.h" /* KBOX_BACKEND_DEFAULT */

/* The default kernelspec. */
#define KBOX_KERNEL_DEFAULT "python3"
/* Default idle time after which a supervisor stops its session. */
#define KBOX_SESSION_TTL_MS (30LL * 60 * 1000)
/* Default outputs quota: the most a session's outputs/ may hold (spill
 * files and images); kbox start --outputs-quota. */
#define KBOX_OUTPUTS_QUOTA (1ULL << 30)

#endif
