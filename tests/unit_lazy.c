/* tests/unit_lazy.c — src/cli/lazy.c: the GSSAPI and libsystemd functions the
 * statically linked kbox program defines load the real library on first use
 * and behave as it does.
 *
 * This program is linked with src/cli/lazy.c and neither library (as the
 * kbox program is), so every call below goes through the forwarders.  No
 * network: a GSSAPI name is imported and displayed, nothing is resolved. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>
#include <gssapi/gssapi.h>
#include <systemd/sd-daemon.h>

#include "tap.h"

/* Whether a library whose file name contains NAME is mapped into us. */
static int mapped(const char *name)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

TEST(neither_library_is_loaded_before_first_use)
{
	CHECK(mapped("libgssapi_krb5") == 0);
	CHECK(mapped("libsystemd") == 0);
	CHECK(mapped("libkrb5") == 0);
}

/* RFC 2744's name-type OIDs, as libzmq passes them. */
TEST(gss_name_types_have_the_standard_values)
{
	static const unsigned char user[] = {0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x01};
	static const unsigned char host[] = {0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04};
	REQUIRE(GSS_C_NT_USER_NAME && GSS_C_NT_HOSTBASED_SERVICE);
	CHECK(GSS_C_NT_USER_NAME->length == sizeof user &&
	      memcmp(GSS_C_NT_USER_NAME->elements, user, sizeof user) == 0);
	CHECK(GSS_C_NT_HOSTBASED_SERVICE->length == sizeof host &&
	      memcmp(GSS_C_NT_HOSTBASED_SERVICE->elements, host, sizeof host) == 0);
	CHECK(mapped("libgssapi_krb5") == 0);
}

/* Import a host-based service name and display it: the library's answer,
 * with its own OID for the name type (so ours was translated). */
TEST(gss_import_and_display_name_go_to_the_library)
{
	OM_uint32 minor = 99, major;
	gss_buffer_desc in = {strlen("kbox@localhost"), (void *)"kbox@localhost"}, out = {0, NULL};
	gss_name_t name = GSS_C_NO_NAME;
	gss_OID type = GSS_C_NO_OID;

	major = gss_import_name(&minor, &in, GSS_C_NT_HOSTBASED_SERVICE, &name);
	REQUIRE(major == GSS_S_COMPLETE);
	CHECK(mapped("libgssapi_krb5") == 1);
	major = gss_display_name(&minor, name, &out, &type);
	CHECK(major == GSS_S_COMPLETE);
	CHECK(out.length == in.length && memcmp(out.value, in.value, in.length) == 0);
	/* the library's own GSS_C_NT_HOSTBASED_SERVICE, not ours */
	CHECK(type != GSS_C_NO_OID && type != GSS_C_NT_HOSTBASED_SERVICE);
	CHECK(type && type->length == GSS_C_NT_HOSTBASED_SERVICE->length &&
	      memcmp(type->elements, GSS_C_NT_HOSTBASED_SERVICE->elements, type->length) == 0);
	CHECK(gss_release_buffer(&minor, &out) == GSS_S_COMPLETE);
	CHECK(gss_release_name(&minor, &name) == GSS_S_COMPLETE && name == GSS_C_NO_NAME);
}

/* An error is the library's too (the values MIT krb5 returns when linked
 * directly). */
TEST(gss_errors_are_the_library_s)
{
	OM_uint32 minor = 0;
	gss_name_t name = GSS_C_NO_NAME;
	CHECK(gss_import_name(&minor, GSS_C_NO_BUFFER, GSS_C_NT_USER_NAME, &name) == GSS_S_BAD_NAME);
	CHECK(gss_delete_sec_context(&minor, NULL, GSS_C_NO_BUFFER) ==
	      (GSS_S_CALL_INACCESSIBLE_WRITE | GSS_S_NO_CONTEXT));
}

/* Socket activation, as systemd documents it: LISTEN_PID and LISTEN_FDS
 * name descriptors from 3; the environment is unset when asked. */
TEST(sd_listen_fds_goes_to_the_library)
{
	char pid[32];
	int fd = open("/dev/null", O_RDONLY);

	/* the passed descriptor: 3 */
	REQUIRE(fd >= 0 && (fd == 3 || dup2(fd, 3) == 3));
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	CHECK(sd_listen_fds(0) == 0);
	CHECK(mapped("libsystemd") == 1);
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	CHECK(sd_listen_fds(0) == 1);
	CHECK(getenv("LISTEN_FDS") != NULL);
	CHECK(sd_listen_fds(1) == 1);
	CHECK(getenv("LISTEN_FDS") == NULL && getenv("LISTEN_PID") == NULL);
	setenv("LISTEN_PID", "1", 1); /* another process's */
	setenv("LISTEN_FDS", "1", 1);
	CHECK(sd_listen_fds(1) == 0);
	/* it marks what it was passed close-on-exec */
	CHECK(fcntl(3, F_GETFD) == FD_CLOEXEC);
	if (fd != 3)
		close(fd);
	close(3);
}

TEST(sd_is_socket_tells_unix_from_inet)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof sin;
	char path[64];
	int u = socket(AF_UNIX, SOCK_STREAM, 0), i = socket(AF_INET, SOCK_STREAM, 0);
	int devnull = open("/dev/null", O_RDONLY);
	unsigned short port;

	REQUIRE(u >= 0 && i >= 0 && devnull >= 0);
	snprintf(path, sizeof path, "/tmp/kbox-lazy-%ld.sock", (long)getpid());
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	unlink(path);
	REQUIRE(bind(u, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(u, 1) == 0);
	REQUIRE(bind(i, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(i, 1) == 0);
	REQUIRE(getsockname(i, (struct sockaddr *)&sin, &l) == 0);
	port = ntohs(sin.sin_port);

	CHECK(sd_is_socket_unix(u, SOCK_STREAM, 1, path, 0) > 0);
	CHECK(sd_is_socket_unix(u, SOCK_STREAM, 1, "/tmp/elsewhere.sock", 0) == 0);
	CHECK(sd_is_socket_unix(u, SOCK_DGRAM, -1, NULL, 0) == 0);
	CHECK(sd_is_socket_unix(i, 0, -1, NULL, 0) == 0);
	CHECK(sd_is_socket_inet(i, AF_INET, SOCK_STREAM, 1, port) > 0);
	CHECK(sd_is_socket_inet(i, AF_INET6, 0, -1, 0) == 0);
	CHECK(sd_is_socket_inet(u, 0, 0, -1, 0) == 0);
	CHECK(sd_is_socket_unix(devnull, 0, -1, NULL, 0) == 0);
	CHECK(sd_is_socket_inet(-1, 0, 0, -1, 0) == -EBADF);
	close(u);
	close(i);
	close(devnull);
	unlink(path);
}

int main(void)
{
	RUN(neither_library_is_loaded_before_first_use);
	RUN(gss_name_types_have_the_standard_values);
	RUN(gss_import_and_display_name_go_to_the_library);
	RUN(gss_errors_are_the_library_s);
	RUN(sd_listen_fds_goes_to_the_library);
	RUN(sd_is_socket_tells_unix_from_inet);
	return tap_done();
}
