/* tests/unit_engine.c — the parts of kbox-engine's Engine API client that
 * need no engine (src/engine/engine.h): the socket's path from
 * DOCKER_HOST, the API version spoken, the engine's error bodies (Docker's
 * and Podman's), and the log stream's frames however they are cut.
 * tests/docker.sh runs the rest against a real engine. */
#include "config.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

TEST(the_socket_is_docker_hosts_unix_path_or_the_default)
{
	char p[108];
	ke_error_t err = {0};
	CHECK_INT_EQ(ke_socket_path(NULL, p, sizeof p, &err), 0);
	CHECK_STR_EQ(p, "/var/run/docker.sock");
	CHECK_INT_EQ(ke_socket_path("", p, sizeof p, &err), 0);
	CHECK_STR_EQ(p, "/var/run/docker.sock");
	CHECK_INT_EQ(ke_socket_path("unix:///run/podman/podman.sock", p, sizeof p, &err), 0);
	CHECK_STR_EQ(p, "/run/podman/podman.sock");
	CHECK_INT_EQ(ke_socket_path("/run/x.sock", p, sizeof p, &err), 0);
	CHECK_STR_EQ(p, "/run/x.sock");
}

TEST(an_engine_elsewhere_is_refused_with_the_reason)
{
	char p[108];
	ke_error_t err = {0};
	CHECK_INT_EQ(ke_socket_path("tcp://127.0.0.1:2375", p, sizeof p, &err), -1);
	CHECK_INT_EQ(err.kind, KE_E_USAGE);
	CHECK_STR_EQ(err.msg, "engine \"tcp://127.0.0.1:2375\": kbox needs the engine on this "
	                      "machine, over its unix socket (unix:///PATH): the kernel's sockets "
	                      "are files here");
	CHECK_INT_EQ(ke_socket_path("ssh://host", p, sizeof p, &err), -1);
	CHECK_INT_EQ(ke_socket_path("unix://relative", p, sizeof p, &err), -1);
	CHECK_INT_EQ(err.kind, KE_E_USAGE);
}

TEST(a_socket_path_longer_than_107_bytes_is_refused)
{
	char p[108], v[200];
	ke_error_t err = {0};
	memset(v, 'a', sizeof v);
	v[0] = '/';
	v[108] = '\0';
	CHECK_INT_EQ(ke_socket_path(v, p, sizeof p, &err), -1);
	v[107] = '\0';
	CHECK_INT_EQ(ke_socket_path(v, p, sizeof p, &err), 0);
	CHECK_INT_EQ((int)strlen(p), 107);
}

TEST(the_version_spoken_is_the_older_of_the_engines_and_1_41)
{
	char v[16];
	ke_error_t err = {0};
	CHECK_INT_EQ(ke_pick_api("1.43", v, sizeof v, &err), 0);
	CHECK_STR_EQ(v, "1.41");
	CHECK_INT_EQ(ke_pick_api("1.41", v, sizeof v, &err), 0);
	CHECK_STR_EQ(v, "1.41");
	CHECK_INT_EQ(ke_pick_api("1.40", v, sizeof v, &err), 0);
	CHECK_STR_EQ(v, "1.40");
	CHECK_INT_EQ(ke_pick_api("2.0", v, sizeof v, &err), 0);
	CHECK_STR_EQ(v, "1.41");
}

TEST(an_engine_older_than_1_40_or_no_version_is_refused)
{
	char v[16];
	ke_error_t err = {0};
	CHECK_INT_EQ(ke_pick_api("1.39", v, sizeof v, &err), -1);
	CHECK_STR_EQ(err.msg, "the engine speaks API 1.39; kbox needs 1.40 or newer (Docker 19.03, "
	                      "Podman 2)");
	CHECK_INT_EQ(ke_pick_api("", v, sizeof v, &err), -1);
	CHECK_INT_EQ(ke_pick_api("1.x", v, sizeof v, &err), -1);
	CHECK_INT_EQ(ke_pick_api("1.41.2", v, sizeof v, &err), -1);
	CHECK_INT_EQ(ke_pick_api(NULL, v, sizeof v, &err), -1);
}

TEST(the_minimum_named_by_a_too_old_refusal_is_read)
{
	char v[16];
	CHECK_INT_EQ(ke_min_api_in("client version 1.41 is too old. Minimum supported API version "
	                           "is 1.44, please upgrade your client to a newer version",
	                           v, sizeof v),
	             0);
	CHECK_STR_EQ(v, "1.44");
	CHECK_INT_EQ(ke_min_api_in("page not found", v, sizeof v), -1);
	CHECK_INT_EQ(ke_min_api_in(NULL, v, sizeof v), -1);
}

TEST(docker_and_podman_error_bodies_give_the_same_message)
{
	ke_error_t a = {0}, b = {0};
	CHECK_INT_EQ(ke_reply_error(404, "{\"message\":\"No such image: x:latest\"}",
	                            "create container c", &a),
	             -1);
	CHECK_INT_EQ(ke_reply_error(404,
	                            "{\"cause\":\"image not known\",\"message\":\"No such image: "
	                            "x:latest\",\"response\":404}",
	                            "create container c", &b),
	             -1);
	CHECK_STR_EQ(a.msg, "create container c: No such image: x:latest");
	CHECK_STR_EQ(b.msg, a.msg);
	CHECK_INT_EQ(a.kind, KE_E_NO_IMAGE);
	CHECK_INT_EQ(b.kind, KE_E_NO_IMAGE);
}

TEST(a_conflict_is_its_own_kind_and_a_body_not_json_is_its_first_line)
{
	ke_error_t err = {0};
	ke_reply_error(409, "{\"message\":\"Conflict. The container name is already in use\"}",
	               "create container c", &err);
	CHECK_INT_EQ(err.kind, KE_E_CONFLICT);
	ke_reply_error(502, "Bad gateway\nmore", "ping", &err);
	CHECK_INT_EQ(err.kind, KE_E_ENGINE);
	CHECK_STR_EQ(err.msg, "ping: Bad gateway");
	ke_reply_error(500, NULL, "ping", &err);
	CHECK_STR_EQ(err.msg, "ping: HTTP status 500");
	CHECK_STR_EQ(ke_kind_name(KE_E_NO_DAEMON), "no-daemon");
	CHECK_STR_EQ(ke_kind_name(KE_E_DENIED), "denied");
}

typedef struct {
	char out[2][256];
	size_t len[2];
} sink_t;

static int collect(void *arg, int stream, const char *bytes, size_t len)
{
	sink_t *s = arg;
	int i = stream == 2 ? 1 : 0;
	memcpy(s->out[i] + s->len[i], bytes, len);
	s->len[i] += len;
	return 0;
}

TEST(log_frames_split_at_every_byte_come_out_whole)
{
	/* stdout "hello\n", stderr "oops", stdout "" (an empty frame), "!" */
	static const unsigned char stream[] = {1,   0,   0,    0,   0, 0, 0, 6, 'h', 'e', 'l',
	                                       'l', 'o', '\n', 2,   0, 0, 0, 0, 0,   0,   4,
	                                       'o', 'o', 'p',  's', 1, 0, 0, 0, 0,   0,   0,
	                                       0,   1,   0,    0,   0, 0, 0, 0, 1,   '!'};
	for (size_t cut = 1; cut <= sizeof stream; cut++) {
		ke_demux_t d = {0};
		sink_t s = {0};
		for (size_t at = 0; at < sizeof stream; at += cut) {
			size_t n = sizeof stream - at < cut ? sizeof stream - at : cut;
			CHECK_INT_EQ(ke_demux(&d, (const char *)stream + at, n, collect, &s), 0);
		}
		CHECK_INT_EQ((int)s.len[0], 7);
		CHECK(memcmp(s.out[0], "hello\n!", 7) == 0);
		CHECK_INT_EQ((int)s.len[1], 4);
		CHECK(memcmp(s.out[1], "oops", 4) == 0);
	}
}

static int refuse(void *arg, int stream, const char *bytes, size_t len)
{
	(void)arg;
	(void)stream;
	(void)bytes;
	(void)len;
	return 1;
}

TEST(a_sink_that_refuses_stops_the_stream)
{
	static const char frame[] = {1, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'};
	ke_demux_t d = {0};
	CHECK_INT_EQ(ke_demux(&d, frame, sizeof frame, refuse, NULL), -1);
}

int main(void)
{
	RUN(the_socket_is_docker_hosts_unix_path_or_the_default);
	RUN(an_engine_elsewhere_is_refused_with_the_reason);
	RUN(a_socket_path_longer_than_107_bytes_is_refused);
	RUN(the_version_spoken_is_the_older_of_the_engines_and_1_41);
	RUN(an_engine_older_than_1_40_or_no_version_is_refused);
	RUN(the_minimum_named_by_a_too_old_refusal_is_read);
	RUN(docker_and_podman_error_bodies_give_the_same_message);
	RUN(a_conflict_is_its_own_kind_and_a_body_not_json_is_its_first_line);
	RUN(log_frames_split_at_every_byte_come_out_whole);
	RUN(a_sink_that_refuses_stops_the_stream);
	return tap_done();
}
