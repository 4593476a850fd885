/* tests/live_async.c — the client on an event loop (kbox/loop.h, the _begin
 * functions of kbox/client.h) against a real ipykernel. */
#include "tap.h"
TEST(placeholder) { CHECK(1); }
int main(void)
{
	RUN(placeholder);
	return tap_done();
}
