/* src/runtime/helper.c — helper.h: a backend's helper process. */
#include "runtime/runtime.h"
#include "runtime/helper.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void kr_helper_init(kr_helper_t *h)
{
	h->cmd_fd = h->status_fd = -1;
	h->in_len = 0;
}

void kr_helper_read(kr_helper_t *h, void (*line)(void *arg, const char *text), void *arg)
{
	char *nl;
	ssize_t n;
	while (h->status_fd >= 0) {
		n = read(h->status_fd, h->in + h->in_len, sizeof h->in - 1 - h->in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || errno != EAGAIN)
				kx_close(&h->status_fd);
			break;
		}
		h->in_len += (size_t)n;
		h->in[h->in_len] = '\0';
		while ((nl = memchr(h->in, '\n', h->in_len))) {
			size_t used = (size_t)(nl - h->in) + 1;
			*nl = '\0';
			line(arg, h->in);
			memmove(h->in, h->in + used, h->in_len - used);
			h->in_len -= used;
		}
		if (h->in_len == sizeof h->in - 1)
			h->in_len = 0; /* (a line longer than any the helper writes) */
	}
}

void kr_helper_send(kr_helper_t *h, const char *cmd)
{
	if (h->cmd_fd >= 0 && kx_write_all(h->cmd_fd, cmd, strlen(cmd)) < 0)
		kx_close(&h->cmd_fd);
}

void kr_helper_end(kr_helper_t *h, kr_sandbox_t *sb, const char *what, int ms)
{
	kx_close(&h->cmd_fd);
	if (sb->pid > 0 && !sb->ended) {
		long long deadline = kx_now_ms() + ms;
		bool running;
		while ((running = kr_sandbox_poll(sb, what, false)) && kx_now_ms() < deadline)
			usleep(10000);
		if (running)
			kx_kill_wait(sb->pid);
		sb->ended = true;
	}
}

void kr_helper_close(kr_helper_t *h)
{
	kx_close(&h->cmd_fd);
	kx_close(&h->status_fd);
}
