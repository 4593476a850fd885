/* src/runtime/supervisor_relay.c — kbox kernel's session: the supervisor
 * binds a Jupyter front end's sockets and relays them to its kernel
 * (kbox/relay.h), which the front end then owns.
 *
 * session.json's "relay" is the front end's connection file.  Once the
 * kernel first answers, the relay is made (a port the front end gave that
 * is still in use is waited for: the kernel it replaces may still hold
 * it) and replaces the supervisor's own client: the front end is the
 * kernel's only client.  Executions of the control socket are refused
 * (the front end runs the code); status, interrupt and stop are not.
 * When the kernel ends, for whatever reason, the session stops, its last
 * replies passed on first: the front end restarts a kernel itself (it
 * starts kbox kernel again). */
#include "runtime/supervisor_int.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static void on_relay_event(void *arg, kbox_relay_event_t ev, kbox_relay_side_t from,
                           kbox_channel_t ch, const char *detail);

/* The front end's connection from TEXT (session.json's "relay"; NULL:
 * none).  0, or -1 with ERR. */
int sup_relay_load(sup_t *s, const char *text, kbox_error_t *err)
{
	json_error_t jerr;
	json_t *j;
	if (!text)
		return 0;
	if (!(j = json_loads(text, JSON_REJECT_DUPLICATES, &jerr)))
		return kbox_error_set(err, KBOX_E_INVALID,
		                      "session.json: relay: not a connection file: %s", jerr.text);
	s->front = kbox_conn_from_json(j, "from the front end", err);
	json_decref(j);
	if (!s->front)
		return -1;
	/* its sockets bound now, as a kernel's are as it starts: the front
	 * end connects while the kernel starts, and its requests wait */
	if (!(s->relay = kbox_relay_new(s->front, KBOX_RELAY_BIND_WAIT_MS, err)))
		return -1;
	kbox_relay_set_cb(s->relay, on_relay_event, s);
	return 0;
}

/* The relay's events, for the log (a dropped message can repeat without
 * end: folded). */
static void on_relay_event(void *arg, kbox_relay_event_t ev, kbox_relay_side_t from,
                           kbox_channel_t ch, const char *detail)
{
	sup_t *s = arg;
	if (ev == KBOX_RELAY_SHUTDOWN) {
		s->relay_shutdown = true;
		s->relay_restart = strcmp(detail, "restart") == 0;
		sup_log(s, "relay-shutdown", json_pack("{s:b}", "restart", s->relay_restart));
		return;
	}
	sup_log(s, "relay-dropped",
	        json_pack("{s:s, s:s, s:s}", "from", from == KBOX_RELAY_FRONT ? "front" : "kernel",
	                  "channel", kbox_channel_name(ch), "why", detail));
}

int sup_relay_begin(sup_t *s, kbox_error_t *err)
{
	if (!s->relay || s->relay_on)
		return 0;
	if (!s->kernel_conn)
		return kbox_error_set(err, KBOX_E_INVALID, "no kernel connection to relay to");
	if (kbox_relay_connect(s->relay, s->kernel_conn, err) < 0 ||
	    kbox_relay_attach(s->relay, s->loop, err) < 0)
		return -1;
	s->relay_on = true;
	/* the front end is the kernel's only client now */
	if (s->client) {
		kbox_client_detach(s->client);
		kbox_client_destroy(&s->client);
	}
	sup_log(s, "relay",
	        json_pack("{s:s, s:s}", "transport",
	                  kbox_conn_transport(s->front) == KBOX_TRANSPORT_TCP ? "tcp" : "ipc", "ip",
	                  kbox_conn_ip(s->front)));
	return 0;
}

void sup_relay_end(sup_t *s)
{
	kbox_relay_stats_t st;
	if (!s->relay || !s->relay_on)
		return;
	kbox_relay_drain(s->relay); /* the kernel's last words (a shutdown_reply) */
	kbox_relay_stats(s->relay, &st);
	sup_log(s, "relay-end",
	        json_pack("{s:I, s:I, s:I, s:I}", "from_front", (json_int_t)st.passed[0],
	                  "from_kernel", (json_int_t)st.passed[1], "dropped_front",
	                  (json_int_t)st.dropped[0], "dropped_kernel", (json_int_t)st.dropped[1]));
	kbox_relay_destroy(&s->relay);
	s->relay_on = false;
}

void sup_relay_free(sup_t *s)
{
	sup_relay_end(s);
	kbox_relay_destroy(&s->relay); /* (one that never ran) */
	kbox_conn_destroy(&s->front);
	kbox_conn_destroy(&s->kernel_conn);
}

int sup_relay_interrupt(sup_t *s, kbox_error_t *err)
{
	if (kbox_kspec_interrupt_mode(s->spec) == KBOX_INTERRUPT_SIGNAL)
		return kr_sandbox_signal(s->sb, SIGINT, err);
	return kbox_relay_request(s->relay, KBOX_CH_CONTROL, "interrupt_request", json_object(),
	                          err);
}

json_t *sup_relay_status(sup_t *s)
{
	kbox_relay_stats_t st;
	if (!s->front)
		return NULL;
	if (!s->relay_on)
		return json_pack("{s:b}", "active", 0);
	kbox_relay_stats(s->relay, &st);
	return json_pack("{s:b, s:{s:I, s:I}, s:{s:I, s:I}}", "active", 1, "passed", "front",
	                 (json_int_t)st.passed[0], "kernel", (json_int_t)st.passed[1], "dropped",
	                 "front", (json_int_t)st.dropped[0], "kernel", (json_int_t)st.dropped[1]);
}
