/* bench/floor_ctl.c — the floor of kbox exec: the least a program of its
 * own can do to run "1+1" on a running session, to show how much of kbox
 * exec's time is its own and how much any process pays here.
 *
 * Usage: floor_ctl SESSION-DIR
 *
 * One process, one call, linked with libc alone: it connects to
 * SESSION-DIR/control.sock, writes the two lines kbox exec sends
 * (kbox-protocol(7): the session line with the directory's identity, then
 * {"op":"execute","code":"1+1","format":"text","grace":5.0}) in one write,
 * reads until both replies (started, then the result) have come, and
 * prints the result's "text" (the escapes \n, \" and \\ undone: "Out[N]:
 * 2" and a newline).  No session lookup, no check of the peer, no JSON
 * parser: less than kbox exec may do.  A path with a quote, a backslash
 * or a control character is refused (it would need escaping).  Exit 0
 * when the second reply says "ok":true and has a text, 1 otherwise (what
 * was wrong on stderr), 2 on a usage error. */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char req[4096 + 256], buf[65536];
	const char *text, *p;
	size_t got = 0;
	int fd, n, lines = 0;
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: floor_ctl SESSION-DIR\n");
		return 2;
	}
	/* (written into the JSON line as it is: nothing there to escape) */
	for (const char *c = argv[1]; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
			fprintf(stderr,
			        "floor_ctl: %s: a quote, backslash or control character "
			        "in the path: give another\n",
			        argv[1]);
			return 1;
		}
	if (stat(argv[1], &st) < 0 || strlen(argv[1]) > 4096 ||
	    (size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control.sock", argv[1]) >=
	            sizeof sa.sun_path) {
		fprintf(stderr, "floor_ctl: %s: no session directory (or its path is too long)\n",
		        argv[1]);
		return 1;
	}
	n = snprintf(req, sizeof req,
	             "{\"op\":\"session\",\"dir\":\"%s\",\"dev\":%llu,\"ino\":%llu}\n"
	             "{\"op\":\"execute\",\"code\":\"1+1\",\"format\":\"text\",\"grace\":5.0}\n",
	             argv[1], (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    write(fd, req, (size_t)n) != n) {
		perror("floor_ctl: control.sock");
		return 1;
	}
	while (lines < 2 && got < sizeof buf - 1) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;
		if (poll(&pfd, 1, -1) < 0 || (r = read(fd, buf + got, sizeof buf - 1 - got)) <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			lines += buf[got + (size_t)i] == '\n';
		got += (size_t)r;
	}
	buf[got] = '\0';
	close(fd);
	p = strchr(buf, '\n');
	if (lines < 2 || !p || !strstr(p, "\"ok\":true") || !(text = strstr(p, "\"text\":\""))) {
		fprintf(stderr, "floor_ctl: the replies are not a started and an ok: %.300s\n",
		        buf);
		return 1;
	}
	for (text += 8; *text && *text != '"'; text++) {
		if (*text == '\\' && text[1]) {
			text++;
			putchar(*text == 'n' ? '\n' : *text);
		} else
			putchar(*text);
	}
	return 0;
}
