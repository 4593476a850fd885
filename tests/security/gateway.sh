#!/bin/sh
# tests/security/gateway.sh — threats.md rows 56 to 59 through the backend
# gateway, as root and as an ordinary user: the tests of tests/gateway.sh
# named after the rows.  The server's token is in no argument, variable,
# log or file of the session's but its own, and no redirect takes it
# elsewhere; an https server's certificate is verified (against
# --ca-file); a hostile server's malformed and forged channel messages are
# dropped, and the result is exact; a session's files stay in its
# directory on the server, and a file got is bounded.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
KBOX_TEST_RUN=${KBOX_TEST_RUN:-start_runs_the_kernel_on_the_server,*row56_the_token_is_in_no_argument_or_variable_of_kbox_processes,*row56_no_file_of_the_session_but_its_token_file_holds_the_token,*row56_a_redirect_is_not_followed_with_the_token,*row57_an_unverified_certificate_is_refused,*row57_with_its_ca_file_the_https_server_is_used,*row58_a_hostile_servers_junk_is_dropped_and_the_result_is_exact,*row58_the_supervisor_goes_on,*row58_its_kernel_is_deleted_at_stop,*row58_a_server_that_never_stops_sending_still_answers,*row58_and_its_kernel_is_deleted_at_stop,*row59_a_path_out_of_the_sessions_directory_is_refused,*row59_so_is_one_to_get,*row59_the_helper_refuses_a_dot_component_itself,*row59_a_file_over_128_mib_is_refused_before_it_is_sent}
export KBOX_TEST_RUN
exec bash "$top_srcdir/tests/gateway.sh"
