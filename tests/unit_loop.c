/* tests/unit_loop.c — the event loop of kbox/loop.h, through its public API:
 * file descriptors (pipes) and their handlers, one-shot and repeating
 * timers, removal and cancellation from inside a handler, the order of
 * timers, and how kbox_loop_run and kbox_loop_once end; then, through
 * libkbox's own src/loop.h, ZeroMQ sockets and their use counts
 * (kbox__zuse_t): a message left behind a quiet ZMQ_FD is found after a
 * counted receive, and a drained socket still wakes on the next one.
 *
 * Nothing here waits on the clock for synchronisation: a descriptor is
 * made readable before the loop runs, a timer of 0 ms is due at the next
 * dispatch, and kbox_loop_once(loop, 0) is one dispatch.  Only the order
 * of the timers test lets timers of 100 and 200 ms come due, and it
 * checks the order they ran in, never how long they took; the socket
 * tests bound their wait (ZBOUND_MS), which a passing test never reaches. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kbox.h>
#include <kbox/loop.h>
#include <zmq.h>

#include "loop.h" /* libkbox's: kbox__loop_add_socket */

#include "tap.h"

/* ---- fixtures ---- */

static kbox_loop_t *loop;
static int fds[2][2]; /* two pipes: [i][0] read end, [i][1] write end */

/* What the handlers did: how many times each ran, in which order. */
static int calls[8];
static char order[64];
static size_t n_order;
static int timer_ids[4];
static int other_fd; /* the descriptor count_and_remove_self removes */

static void note(char c)
{
	if (n_order + 1 < sizeof order) {
		order[n_order++] = c;
		order[n_order] = '\0';
	}
}

/* A fresh loop and two pipes, nothing registered; the records cleared. */
static int setup(void)
{
	memset(calls, 0, sizeof calls);
	memset(order, 0, sizeof order);
	memset(timer_ids, 0, sizeof timer_ids);
	n_order = 0;
	loop = kbox_loop_new(NULL);
	if (!loop)
		return -1;
	for (int i = 0; i < 2; i++)
		if (pipe2(fds[i], O_CLOEXEC | O_NONBLOCK) < 0)
			return -1;
	return 0;
}

static void teardown(void)
{
	kbox_loop_destroy(&loop);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			if (fds[i][j] >= 0) {
				close(fds[i][j]);
				fds[i][j] = -1;
			}
}

/* Run test NAME between setup and teardown. */
#define RUN_LOOP(name)                                                    \
	do {                                                              \
		if (setup() < 0) {                                        \
			printf("Bail out! setup: %s\n", strerror(errno)); \
			exit(99);                                         \
		}                                                         \
		RUN(name);                                                \
		teardown();                                               \
	} while (0)

/* Make pipe I readable: one byte in it. */
static void make_readable(int i)
{
	if (write(fds[i][1], "x", 1) != 1)
		printf("# write: %s\n", strerror(errno));
}

/* Read what pipe I holds; how many bytes. */
static int drain(int i)
{
	char buf[64];
	ssize_t n = read(fds[i][0], buf, sizeof buf);
	return n < 0 ? 0 : (int)n;
}

/* ---- handlers: ARG is an int * index into calls[] (and a letter in order) ---- */

static int count_and_go_on(kbox_loop_t *l, void *arg)
{
	int i = *(int *)arg;
	(void)l;
	calls[i]++;
	note((char)('a' + i));
	return 0;
}

static int count_and_stop(kbox_loop_t *l, void *arg)
{
	count_and_go_on(l, arg);
	kbox_loop_stop(l);
	return 0;
}

static int count_and_fail(kbox_loop_t *l, void *arg)
{
	count_and_go_on(l, arg);
	return -1;
}

/* Read pipe 0, count; stop once it is empty and its writer gone. */
static int read_pipe0(kbox_loop_t *l, void *arg)
{
	int n = drain(0);
	count_and_go_on(l, arg);
	if (n == 0)
		kbox_loop_remove_fd(l, fds[0][0]);
	return 0;
}

/* Count, then forget the other pipe's read end. */
static int count_and_remove_other(kbox_loop_t *l, void *arg)
{
	int i = *(int *)arg;
	count_and_go_on(l, arg);
	kbox_loop_remove_fd(l, i == 0 ? fds[1][0] : fds[0][0]);
	return 0;
}

/* Count, then forget its own descriptor (other_fd) without reading it. */
static int count_and_remove_self(kbox_loop_t *l, void *arg)
{
	count_and_go_on(l, arg);
	kbox_loop_remove_fd(l, other_fd);
	return 0;
}

/* Count; at the third call cancel itself (timer_ids[I]). */
static int count_cancel_at_3(kbox_loop_t *l, void *arg)
{
	int i = *(int *)arg;
	count_and_go_on(l, arg);
	if (calls[i] == 3)
		kbox_loop_cancel_timer(l, timer_ids[i]);
	return 0;
}

/* Count, then cancel the other timer (timer_ids[1 - I]). */
static int count_and_cancel_other(kbox_loop_t *l, void *arg)
{
	int i = *(int *)arg;
	count_and_go_on(l, arg);
	kbox_loop_cancel_timer(l, timer_ids[1 - i]);
	return 0;
}

static int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/* Count, then add a one-shot timer of 0 ms counting in calls[1]. */
static int count_and_add_timer(kbox_loop_t *l, void *arg)
{
	count_and_go_on(l, arg);
	timer_ids[1] = kbox_loop_add_timer(l, 0, false, count_and_go_on, &idx[1], NULL);
	return 0;
}

/* ---- how a run ends ---- */

/* A loop with nothing registered has nothing to wait for: run returns 0. */
TEST(run_of_an_empty_loop_returns_0_at_once)
{
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(kbox_loop_once(loop, -1), 0);
}

/* A handler that returns -1 ends kbox_loop_run, which returns -1. */
TEST(handler_returning_minus_1_ends_run_with_minus_1)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_fail, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_run(loop), -1);
	CHECK_INT_EQ(calls[0], 1);
}

/* kbox_loop_stop from a handler ends run with 0; the registrations stay,
 * so a second run dispatches them again. */
TEST(stop_from_a_handler_ends_run_with_0_and_keeps_registrations)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_stop, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(kbox_loop_run(loop), 0); /* the byte is still unread */
	CHECK_INT_EQ(calls[0], 2);
}

/* A stop asked for before the run ends the next run at once, without a
 * handler called; the stop is then spent. */
TEST(stop_before_run_ends_the_next_run_at_once_and_is_spent)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_stop, &idx[0], NULL) == 0);
	kbox_loop_stop(loop);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
}

/* kbox_loop_once: 1 when a handler returned -1 (then spent: the next
 * once is 0), 1 when a handler stopped the loop, 0 otherwise. */
TEST(once_says_1_after_a_failure_or_a_stop_then_0)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_fail, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 1);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_go_on, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_stop, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 1);
	kbox_loop_remove_fd(loop, fds[0][0]);
	CHECK_INT_EQ(kbox_loop_once(loop, -1), 0); /* the stop is spent, nothing left */
	CHECK_INT_EQ(calls[0], 3);
}

/* ---- descriptors ---- */

/* A readable descriptor's handler runs with its ARG; one that is not
 * readable is not called. */
TEST(fd_handler_runs_when_readable_and_only_then)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_go_on, &idx[0], NULL) == 0);
	REQUIRE(kbox_loop_add_fd(loop, fds[1][0], count_and_go_on, &idx[1], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(calls[1], 0);
	CHECK_INT_EQ(drain(0), 1);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(calls[1], 0);
}

/* A descriptor whose writer closed (hang-up, no data) wakes its handler. */
TEST(fd_handler_runs_on_hang_up)
{
	close(fds[0][1]);
	fds[0][1] = -1;
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], read_pipe0, &idx[0], NULL) == 0);
	/* read_pipe0 reads 0 bytes (end of file) and removes the descriptor:
	 * nothing is left, so the run ends */
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
}

/* A second registration of a descriptor replaces the first handler. */
TEST(second_registration_of_an_fd_replaces_its_handler)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_go_on, &idx[0], NULL) == 0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_stop, &idx[1], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 0);
	CHECK_INT_EQ(calls[1], 1);
}

/* Bad arguments are refused with KBOX_E_INVALID and a message. */
TEST(add_fd_without_descriptor_or_handler_is_refused)
{
	kbox_error_t err = {0};
	CHECK_INT_EQ(kbox_loop_add_fd(loop, -1, count_and_go_on, NULL, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_STR_EQ(err.msg, "loop: no descriptor or no handler given");
	memset(&err, 0, sizeof err);
	CHECK_INT_EQ(kbox_loop_add_fd(loop, fds[0][0], NULL, NULL, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	memset(&err, 0, sizeof err);
	CHECK_INT_EQ(kbox_loop_add_timer(loop, 0, false, NULL, NULL, &err), -1);
	CHECK_INT_EQ(err.code, KBOX_E_INVALID);
	CHECK_STR_EQ(err.msg, "loop: no timer handler given");
	CHECK_INT_EQ(kbox_loop_run(loop), 0); /* nothing was registered */
}

/* A handler that removes another ready descriptor keeps that one's
 * handler from running, in the same dispatch too: of two descriptors
 * ready together, each removing the other, exactly one runs. */
TEST(fd_removed_by_another_handler_is_not_called)
{
	make_readable(0);
	make_readable(1);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_remove_other, &idx[0], NULL) == 0);
	REQUIRE(kbox_loop_add_fd(loop, fds[1][0], count_and_remove_other, &idx[1], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0] + calls[1], 1);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0] + calls[1], 2); /* the survivor, still readable */
}

/* A handler may remove its own descriptor: it is not called again though
 * its data is still unread, and with nothing left a run ends. */
TEST(fd_removed_by_its_own_handler_is_not_called_again)
{
	make_readable(0);
	other_fd = fds[0][0];
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_remove_self, &idx[0], NULL) == 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(drain(0), 1);
}

/* Removing a descriptor that is not registered changes nothing. */
TEST(removing_an_unknown_fd_is_ignored)
{
	make_readable(0);
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_stop, &idx[0], NULL) == 0);
	kbox_loop_remove_fd(loop, fds[1][0]);
	kbox_loop_remove_fd(loop, -1);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
}

/* ---- timers ---- */

/* A one-shot timer runs once, then is gone: the run ends with nothing
 * left.  Ids are positive and distinct. */
TEST(one_shot_timer_runs_once)
{
	int a = kbox_loop_add_timer(loop, 0, false, count_and_go_on, &idx[0], NULL);
	int b = kbox_loop_add_timer(loop, 0, false, count_and_go_on, &idx[1], NULL);
	CHECK(a > 0);
	CHECK(b > 0);
	CHECK(a != b);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(calls[1], 1);
}

/* A negative delay counts as 0: due at the next dispatch. */
TEST(timer_with_negative_delay_is_due_at_once)
{
	REQUIRE(kbox_loop_add_timer(loop, -5, false, count_and_go_on, &idx[0], NULL) > 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0], 1);
}

/* A repeating timer runs until cancelled (here by its own handler, at its
 * third call); then nothing is left and the run ends. */
TEST(repeating_timer_runs_until_cancelled_from_its_handler)
{
	timer_ids[0] = kbox_loop_add_timer(loop, 1, true, count_cancel_at_3, &idx[0], NULL);
	REQUIRE(timer_ids[0] > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 3);
}

/* A repeating timer runs at most once per dispatch, even when it is due
 * again at once (0 ms). */
TEST(repeating_timer_runs_once_per_dispatch)
{
	REQUIRE(kbox_loop_add_timer(loop, 0, true, count_and_go_on, &idx[0], NULL) > 0);
	for (int i = 1; i <= 3; i++) {
		CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
		CHECK_INT_EQ(calls[0], i);
	}
}

/* A timer added by a handler runs at the earliest in the next dispatch,
 * even when it is already due. */
TEST(timer_added_in_a_handler_waits_for_the_next_dispatch)
{
	REQUIRE(kbox_loop_add_timer(loop, 0, false, count_and_add_timer, &idx[0], NULL) > 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK(timer_ids[1] > 0);
	CHECK_INT_EQ(calls[1], 0);
	CHECK_INT_EQ(kbox_loop_once(loop, 0), 0);
	CHECK_INT_EQ(calls[1], 1);
}

/* Timers run earliest due first, whatever order they were added in.
 * (Each is at least 100 ms from the next, so only a 100 ms stall between
 * two kbox_loop_add_timer calls could change which is due first.) */
TEST(timers_run_earliest_due_first)
{
	REQUIRE(kbox_loop_add_timer(loop, 200, false, count_and_go_on, &idx[2], NULL) > 0);
	REQUIRE(kbox_loop_add_timer(loop, 0, false, count_and_go_on, &idx[0], NULL) > 0);
	REQUIRE(kbox_loop_add_timer(loop, 100, false, count_and_go_on, &idx[1], NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_STR_EQ(order, "abc");
}

/* Of two timers due in the same dispatch that cancel each other, exactly
 * one runs. */
TEST(timer_cancelled_by_another_handler_does_not_run)
{
	timer_ids[0] = kbox_loop_add_timer(loop, 0, false, count_and_cancel_other, &idx[0], NULL);
	timer_ids[1] = kbox_loop_add_timer(loop, 0, false, count_and_cancel_other, &idx[1], NULL);
	REQUIRE(timer_ids[0] > 0 && timer_ids[1] > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0] + calls[1], 1);
}

/* Cancelling an unknown id, or a one-shot timer that has run, changes
 * nothing else. */
TEST(cancelling_an_unknown_or_spent_timer_is_ignored)
{
	int spent = kbox_loop_add_timer(loop, 0, false, count_and_go_on, &idx[0], NULL);
	REQUIRE(spent > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	REQUIRE(kbox_loop_add_timer(loop, 0, false, count_and_go_on, &idx[1], NULL) > 0);
	kbox_loop_cancel_timer(loop, spent);
	kbox_loop_cancel_timer(loop, 123456);
	kbox_loop_cancel_timer(loop, -1);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 1);
	CHECK_INT_EQ(calls[1], 1);
}

/* A timer keeps a run going while its descriptor is quiet: the run waits
 * for the timer, whose handler stops it. */
TEST(run_waits_for_a_timer_beside_a_quiet_fd)
{
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_go_on, &idx[0], NULL) == 0);
	REQUIRE(kbox_loop_add_timer(loop, 1, false, count_and_stop, &idx[1], NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(calls[0], 0);
	CHECK_INT_EQ(calls[1], 1);
}

/* ---- destruction ---- */

/* Destroy forgets what is registered, sets the pointer to NULL and
 * accepts NULL; descriptors are not closed. */
TEST(destroy_nulls_the_pointer_and_leaves_fds_open)
{
	kbox_loop_t *none = NULL;
	REQUIRE(kbox_loop_add_fd(loop, fds[0][0], count_and_go_on, &idx[0], NULL) == 0);
	REQUIRE(kbox_loop_add_timer(loop, 0, true, count_and_go_on, &idx[1], NULL) > 0);
	kbox_loop_destroy(&loop);
	CHECK(loop == NULL);
	kbox_loop_destroy(&none);
	kbox_loop_destroy(NULL);
	CHECK(fcntl(fds[0][0], F_GETFD) >= 0);
	CHECK_INT_EQ(calls[0] + calls[1], 0);
}

/* ---- ZeroMQ sockets (src/loop.h) ---- */

/* An inproc PAIR: zs[0] sends, zs[1] is registered with the loop. */
static void *zctx;
static void *zs[2];
static kbox__zuse_t zuse;
static int zgot;        /* messages the socket handler received */
static int zwant;       /* the handler stops the loop after this many */
static bool zbound;     /* the bound ran out first */
static bool zsent_more; /* sender_timer sent its message */

static int zsetup(void)
{
	int zero = 0;
	memset(&zuse, 0, sizeof zuse);
	zgot = zwant = 0;
	zbound = zsent_more = false;
	if (!(zctx = zmq_ctx_new()) || !(zs[0] = zmq_socket(zctx, ZMQ_PAIR)) ||
	    !(zs[1] = zmq_socket(zctx, ZMQ_PAIR)))
		return -1;
	zmq_setsockopt(zs[0], ZMQ_LINGER, &zero, sizeof zero);
	zmq_setsockopt(zs[1], ZMQ_LINGER, &zero, sizeof zero);
	if (zmq_bind(zs[1], "inproc://unit_loop") < 0 ||
	    zmq_connect(zs[0], "inproc://unit_loop") < 0)
		return -1;
	return 0;
}

static void zteardown(void)
{
	for (int i = 0; i < 2; i++)
		if (zs[i]) {
			zmq_close(zs[i]);
			zs[i] = NULL;
		}
	if (zctx) {
		zmq_ctx_term(zctx);
		zctx = NULL;
	}
}

/* The handler of zs[1]: receives ONE message (counted), as libkbox's
 * channel handlers do, and stops the loop at zwant. */
static int recv_one(kbox_loop_t *l, void *arg)
{
	char buf[16];
	(void)arg;
	zuse.uses++;
	if (zmq_recv(zs[1], buf, sizeof buf, ZMQ_DONTWAIT) >= 0) {
		if (++zgot == zwant)
			kbox_loop_stop(l);
	} else if (errno == EAGAIN) {
		zuse.drained = zuse.uses;
	}
	return 0;
}

/* The handler of zs[1] that receives until nothing is left (the socket
 * is then drained: not asked again until it is used). */
static int recv_all(kbox_loop_t *l, void *arg)
{
	char buf[16];
	(void)arg;
	for (;;) {
		zuse.uses++;
		if (zmq_recv(zs[1], buf, sizeof buf, ZMQ_DONTWAIT) < 0)
			break;
		if (++zgot == zwant) {
			kbox_loop_stop(l);
			return 0;
		}
	}
	if (errno == EAGAIN)
		zuse.drained = zuse.uses;
	return 0;
}

/* A bound on the wait (a test that passes never reaches it). */
static int bound_reached(kbox_loop_t *l, void *arg)
{
	(void)arg;
	zbound = true;
	kbox_loop_stop(l);
	return 0;
}

/* Sends one more message on zs[0], once the socket has been drained. */
static int sender_timer(kbox_loop_t *l, void *arg)
{
	(void)l;
	(void)arg;
	if (zgot == 2 && !zsent_more && zmq_send(zs[0], "m3", 2, 0) == 2)
		zsent_more = true;
	return 0;
}

#define ZBOUND_MS 20000

/* Two messages wait when the socket's descriptor fires once: the handler
 * takes one, and the second, behind a descriptor that will not fire
 * again, is found because the receive was counted. */
TEST(second_message_behind_a_quiet_descriptor_is_found_after_a_counted_receive)
{
	REQUIRE(zmq_send(zs[0], "m1", 2, 0) == 2 && zmq_send(zs[0], "m2", 2, 0) == 2);
	zwant = 2;
	REQUIRE(kbox__loop_add_socket(loop, zs[1], &zuse, recv_one, NULL, NULL) == 0);
	REQUIRE(kbox_loop_add_timer(loop, ZBOUND_MS, false, bound_reached, NULL, NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK_INT_EQ(zgot, 2);
	CHECK(!zbound);
}

/* A socket its handler drained (a receive found nothing) is not asked
 * again, and still wakes its handler when the next message comes. */
TEST(drained_socket_wakes_on_the_next_message)
{
	REQUIRE(zmq_send(zs[0], "m1", 2, 0) == 2 && zmq_send(zs[0], "m2", 2, 0) == 2);
	zwant = 3;
	REQUIRE(kbox__loop_add_socket(loop, zs[1], &zuse, recv_all, NULL, NULL) == 0);
	REQUIRE(kbox_loop_add_timer(loop, 10, true, sender_timer, NULL, NULL) > 0);
	REQUIRE(kbox_loop_add_timer(loop, ZBOUND_MS, false, bound_reached, NULL, NULL) > 0);
	CHECK_INT_EQ(kbox_loop_run(loop), 0);
	CHECK(zsent_more);
	CHECK_INT_EQ(zgot, 3);
	CHECK(!zbound);
	CHECK(zuse.drained > 0);
}

/* Run socket test NAME between setup and teardown, with the PAIR. */
#define RUN_ZLOOP(name)                                                       \
	do {                                                                  \
		if (setup() < 0 || zsetup() < 0) {                            \
			printf("Bail out! setup: %s\n", zmq_strerror(errno)); \
			exit(99);                                             \
		}                                                             \
		RUN(name);                                                    \
		teardown();                                                   \
		zteardown();                                                  \
	} while (0)

int main(void)
{
	for (int i = 0; i < 2; i++)
		fds[i][0] = fds[i][1] = -1;
	RUN_LOOP(run_of_an_empty_loop_returns_0_at_once);
	RUN_LOOP(handler_returning_minus_1_ends_run_with_minus_1);
	RUN_LOOP(stop_from_a_handler_ends_run_with_0_and_keeps_registrations);
	RUN_LOOP(stop_before_run_ends_the_next_run_at_once_and_is_spent);
	RUN_LOOP(once_says_1_after_a_failure_or_a_stop_then_0);
	RUN_LOOP(fd_handler_runs_when_readable_and_only_then);
	RUN_LOOP(fd_handler_runs_on_hang_up);
	RUN_LOOP(second_registration_of_an_fd_replaces_its_handler);
	RUN_LOOP(add_fd_without_descriptor_or_handler_is_refused);
	RUN_LOOP(fd_removed_by_another_handler_is_not_called);
	RUN_LOOP(fd_removed_by_its_own_handler_is_not_called_again);
	RUN_LOOP(removing_an_unknown_fd_is_ignored);
	RUN_LOOP(one_shot_timer_runs_once);
	RUN_LOOP(timer_with_negative_delay_is_due_at_once);
	RUN_LOOP(repeating_timer_runs_until_cancelled_from_its_handler);
	RUN_LOOP(repeating_timer_runs_once_per_dispatch);
	RUN_LOOP(timer_added_in_a_handler_waits_for_the_next_dispatch);
	RUN_LOOP(timers_run_earliest_due_first);
	RUN_LOOP(timer_cancelled_by_another_handler_does_not_run);
	RUN_LOOP(cancelling_an_unknown_or_spent_timer_is_ignored);
	RUN_LOOP(run_waits_for_a_timer_beside_a_quiet_fd);
	RUN_LOOP(destroy_nulls_the_pointer_and_leaves_fds_open);
	RUN_ZLOOP(second_message_behind_a_quiet_descriptor_is_found_after_a_counted_receive);
	RUN_ZLOOP(drained_socket_wakes_on_the_next_message);
	return tap_done();
}
