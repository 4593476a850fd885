#!/bin/sh
# tests/security/kernelspec.sh — threats.md row 55 through kbox's
# kernelspec (kbox kernel, for Jupyter front ends), as root and as an
# ordinary user: the tests of tests/kernelspec_test.py named after the
# row.  Code in the kernel forges messages for the front end (a bad
# signature, a header that is not JSON, 2000 frames, a reply with no
# routing frame) and floods it; a front end's connection sends messages
# signed with another key and replays one; the sandbox holds (no route
# but lo, no host files) with the kernel started by jupyter_client.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
KBOX_TEST_RUN=${KBOX_TEST_RUN:-*row55_relay_drops_forged_kernel_messages,*row55_relay_bounded_under_a_flood,*row55_front_end_forged_and_replayed_messages_dropped,*row55_sandbox_holds_through_the_kernelspec,*row55_a_70_mib_output_passes_and_the_kernel_goes_on,*row55_a_workspace_holding_the_connection_file_is_not_bound}
export KBOX_TEST_RUN
exec sh "$top_srcdir/tests/kernelspec.sh"
