/* tests/unit_ro_bind.c — the read-only binds of the bwrap sandbox
 * (src/runtime/ro_bind.c): what is refused and why, links followed inside
 * a root filesystem (never out of it), and the binds found from an
 * install tree's links and a kernelspec's metadata.kbox.ro_bind.
 *
 * Everything happens in a fake root under a fresh /tmp directory (ROOT),
 * the way kbox start --rootfs gives one, so the host's /etc is not
 * touched and the answers do not depend on it. */
#include "runtime/runtime.h"
#include "runtime/ro_bind.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "tmpdir.h"

static char *root;                     /* the fake root */
static const char *exe = "/usr/bin/R"; /* the kernel's command in it */
static char dest[PATH_MAX], src[PATH_MAX * 2];
static kbox_error_t err;

/* Make ROOT/PATH: a file with MODE, or a directory when PATH ends in '/'. */
static void make(const char *path, mode_t mode)
{
	char full[PATH_MAX], *p;
	snprintf(full, sizeof full, "%s%s", root, path);
	for (p = full + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(full, 0755);
		*p = '/';
	}
	if (full[strlen(full) - 1] != '/') {
		int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC, mode);
		if (fd >= 0)
			close(fd);
		chmod(full, mode);
	}
}

/* ROOT/PATH, a symlink to TARGET. */
static void link_to(const char *path, const char *target)
{
	char full[PATH_MAX];
	snprintf(full, sizeof full, "%s%s", root, path);
	if (symlink(target, full) < 0)
		printf("# symlink %s: %s\n", full, strerror(errno));
}

/* kr_ro_bind_check of PATH in ROOT, with DENY. */
static int check(const char *path, const char *const *deny)
{
	memset(&err, 0, sizeof err);
	dest[0] = src[0] = '\0';
	return kr_ro_bind_check(root, path, deny, dest, src, sizeof dest, &err);
}

/* ROOT followed by PATH, in a static buffer. */
static const char *in_root(const char *path)
{
	static char buf[PATH_MAX * 2];
	snprintf(buf, sizeof buf, "%s%s", root, path);
	return buf;
}

TEST(a_readable_directory_below_etc_is_bound_at_its_path)
{
	CHECK_INT_EQ(check("/etc/Rconf", NULL), 1);
	CHECK_STR_EQ(dest, "/etc/Rconf");
	CHECK_STR_EQ(src, in_root("/etc/Rconf"));
}

TEST(a_path_is_normalized)
{
	CHECK_INT_EQ(check("/etc//Rconf/./", NULL), 1);
	CHECK_STR_EQ(dest, "/etc/Rconf");
}

TEST(an_absolute_link_is_followed_inside_the_root)
{
	CHECK_INT_EQ(check("/etc/link", NULL), 1);
	CHECK_STR_EQ(dest, "/etc/link");
	CHECK_STR_EQ(src, in_root("/etc/Rconf"));
}

TEST(a_relative_link_cannot_climb_out_of_the_root)
{
	CHECK_INT_EQ(check("/etc/climb", NULL), 1);
	CHECK_STR_EQ(src, in_root("/etc/Rconf/a"));
}

TEST(what_the_sandbox_shows_already_is_left_alone)
{
	CHECK_INT_EQ(check("/usr/lib/R", NULL), 0);
	CHECK_INT_EQ(check("/etc/fonts/x", NULL), 0);
	CHECK_INT_EQ(check("/etc/python3.11", NULL), 0);
}

TEST(a_dotdot_path_is_refused)
{
	CHECK_INT_EQ(check("/etc/../etc/Rconf", NULL), -1);
	CHECK_STR_EQ(err.msg, "cannot bind /etc/../etc/Rconf: not an absolute path without \"..\"");
	CHECK_INT_EQ(check("etc/Rconf", NULL), -1);
}

TEST(only_etc_opt_and_srv_are_bound)
{
	static const char *const out[] = {"/",          "/etc",  "/opt",          "/srv",
	                                  "/home/bob",  "/root", "/proc/1",       "/sys/kernel",
	                                  "/dev/sda",   "/tmp",  "/var/lib/kbox", "/run/kbox",
	                                  "/workspace", NULL};
	for (size_t i = 0; out[i]; i++) {
		char want[PATH_MAX];
		snprintf(want, sizeof want,
		         "cannot bind %s: only what lies below /etc, /opt or /srv may be bound",
		         out[i]);
		CHECK_INT_EQ(check(out[i], NULL), -1);
		CHECK_STR_EQ(err.msg, want);
	}
}

TEST(the_sandbox_etc_files_are_never_replaced)
{
	CHECK_INT_EQ(check("/etc/passwd", NULL), -1);
	CHECK_STR_EQ(err.msg, "cannot bind /etc/passwd: the sandbox has its own /etc/passwd");
	CHECK_INT_EQ(check("/etc/nsswitch.conf", NULL), -1);
}

TEST(a_secret_looking_name_is_refused_before_it_is_looked_up)
{
	static const char *const secret[] = {"/etc/shadow",
	                                     "/etc/gshadow-",
	                                     "/etc/ssh/sshd_config",
	                                     "/etc/ssl/private/x",
	                                     "/etc/sudoers.d/a",
	                                     "/opt/app/server.key",
	                                     "/srv/x/.gnupg",
	                                     "/etc/security",
	                                     "/opt/api-token",
	                                     "/etc/krb5.keytab",
	                                     NULL};
	for (size_t i = 0; secret[i]; i++) {
		CHECK_INT_EQ(check(secret[i], NULL), -1);
		CHECK_CONTAINS(err.msg, "its name looks secret");
	}
}

TEST(a_link_to_a_secret_looking_name_is_refused)
{
	CHECK_INT_EQ(check("/etc/sh-link", NULL), -1);
	CHECK_STR_EQ(err.msg,
	             "cannot bind /etc/sh-link: it leads to /etc/shadow, whose name looks secret "
	             "(shadow)");
}

TEST(a_link_out_of_the_allowed_places_is_refused)
{
	CHECK_INT_EQ(check("/etc/tohome", NULL), -1);
	CHECK_STR_EQ(
	        err.msg,
	        "cannot bind /etc/tohome: it leads to /home/bob, not below /etc, /opt, /srv or "
	        "/usr");
}

TEST(a_file_not_every_user_may_read_is_refused)
{
	CHECK_INT_EQ(check("/etc/R/closed", NULL), -1);
	CHECK_STR_EQ(err.msg, "cannot bind /etc/R/closed: not every user may read it (mode 0600)");
}

TEST(a_file_not_every_user_may_reach_is_refused)
{
	char want[PATH_MAX * 2];
	snprintf(
	        want, sizeof want,
	        "cannot bind /etc/hidden/f: not every user may reach it (%s/etc/hidden is mode 0700)",
	        root);
	CHECK_INT_EQ(check("/etc/hidden/f", NULL), -1);
	CHECK_STR_EQ(err.msg, want);
}

TEST(where_the_root_itself_is_is_not_judged)
{
	/* a --rootfs kept in a private directory still gives its binds */
	chmod(root, 0700);
	CHECK_INT_EQ(check("/etc/Rconf", NULL), 1);
	chmod(root, 0755);
}

TEST(a_directory_holding_one_is_refused)
{
	char want[PATH_MAX * 2];
	snprintf(want, sizeof want,
	         "cannot bind /etc/R: it holds %s/etc/R/closed, which not every user may read",
	         root);
	CHECK_INT_EQ(check("/etc/R", NULL), -1);
	CHECK_STR_EQ(err.msg, want);
}

TEST(a_directory_holding_a_secret_name_is_refused)
{
	char want[PATH_MAX * 2];
	snprintf(want, sizeof want,
	         "cannot bind /etc/tls: it holds %s/etc/tls/private, whose name looks secret "
	         "(private)",
	         root);
	CHECK_INT_EQ(check("/etc/tls", NULL), -1);
	CHECK_STR_EQ(err.msg, want);
}

TEST(a_fifo_is_refused)
{
	CHECK_INT_EQ(check("/etc/fifo", NULL), -1);
	CHECK_STR_EQ(err.msg,
	             "cannot bind /etc/fifo: only a regular file or a directory may be bound");
}

TEST(a_link_loop_is_refused)
{
	CHECK_INT_EQ(check("/etc/loop", NULL), -1);
	CHECK_STR_EQ(err.msg, "cannot bind /etc/loop: Too many levels of symbolic links");
}

TEST(kbox_own_directories_are_refused_and_what_holds_them)
{
	char own[PATH_MAX * 2], want[PATH_MAX * 3];
	const char *deny[] = {own, NULL};
	snprintf(own, sizeof own, "%s/etc/Rconf/state", root);
	snprintf(want, sizeof want, "cannot bind /etc/Rconf: it is, holds or lies in kbox's own %s",
	         own);
	CHECK_INT_EQ(check("/etc/Rconf", deny), -1);
	CHECK_STR_EQ(err.msg, want);
	CHECK_INT_EQ(check("/etc/Rconf/state/x", deny), -1);
}

/* The binds of kr_ro_bind_find, "dest<-src" sorted, in BUF. */
static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *find(const char *spec_json, char *buf, size_t size)
{
	char dir[PATH_MAX], file[PATH_MAX + 16], *lines[2 * KR_RO_BIND_MAX], **binds;
	kbox_kspec_t *spec;
	size_t n = 0, used = 0;
	FILE *f;
	snprintf(dir, sizeof dir, "%s/spec/r", root);
	snprintf(file, sizeof file, "%s/kernel.json", dir);
	mkdir(in_root("/spec"), 0755);
	mkdir(dir, 0755);
	if (!(f = fopen(file, "w")))
		return "(cannot write kernel.json)";
	fputs(spec_json, f);
	fclose(f);
	memset(&err, 0, sizeof err);
	if (!(spec = kbox_kspec_load(dir, &err)))
		return "(cannot load kernel.json)";
	binds = kr_ro_bind_find(root, spec, exe, NULL, &err);
	kbox_kspec_destroy(&spec);
	if (!binds)
		return NULL;
	for (size_t i = 0; binds[i] && binds[i + 1] && n < 2 * KR_RO_BIND_MAX; i += 2) {
		char *l = malloc(strlen(binds[i]) + strlen(binds[i + 1]) + 3);
		sprintf(l, "%s<-%s", binds[i + 1], binds[i] + strlen(root));
		lines[n++] = l;
	}
	kbox_strv_free(binds);
	qsort(lines, n, sizeof *lines, cmp);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s",
		                         i ? " " : "", lines[i]);
		free(lines[i]);
	}
	return buf;
}

TEST(the_install_tree_links_and_the_kernelspec_paths_are_found)
{
	char buf[4096];
	/* Renviron, Rprofile.site (a relative link) and Rconf (a directory)
	 * from the links of /usr/lib/R/etc, once each; Rconf/a is inside
	 * Rconf; the links to /etc/shadow, /home/bob, an unreadable file and
	 * a loop are left out; /etc/motd from the kernelspec */
	CHECK_STR_EQ(find("{\"argv\": [\"R\"], \"display_name\": \"R\", \"language\": \"R\", "
	                  "\"metadata\": {\"kbox\": {\"ro_bind\": [\"/etc/motd\", "
	                  "\"/etc/R/Renviron\"]}}}",
	                  buf, sizeof buf),
	             "/etc/R/Renviron<-/etc/R/Renviron /etc/R/Rprofile.site<-/etc/R/Rprofile.site "
	             "/etc/Rconf<-/etc/Rconf /etc/motd<-/etc/motd");
}

TEST(the_links_of_a_bin_directory_of_its_own_are_found_not_of_usr_bin)
{
	char buf[4096];
	const char *spec = "{\"argv\": [\"R\"], \"display_name\": \"R\", \"language\": \"R\"}";
	exe = "/opt/r/bin/R";
	CHECK_STR_EQ(find(spec, buf, sizeof buf), "/etc/motd<-/etc/motd");
	exe = "/usr/bin/R";
	CHECK_STR_EQ(find(spec, buf, sizeof buf),
	             "/etc/R/Renviron<-/etc/R/Renviron /etc/R/Rprofile.site<-/etc/R/Rprofile.site "
	             "/etc/Rconf<-/etc/Rconf");
}

TEST(a_refused_kernelspec_path_fails_the_find)
{
	char buf[4096];
	CHECK(find("{\"argv\": [\"R\"], \"display_name\": \"R\", \"language\": \"R\", "
	           "\"metadata\": {\"kbox\": {\"ro_bind\": [\"/etc/shadow\"]}}}",
	           buf, sizeof buf) == NULL);
	CHECK_STR_EQ(err.msg, "kernelspec r: metadata.kbox.ro_bind: cannot bind /etc/shadow: its "
	                      "name looks secret (shadow)");
}

TEST(a_kernelspec_ro_bind_that_is_not_a_list_of_strings_fails)
{
	char buf[4096];
	CHECK(find("{\"argv\": [\"R\"], \"display_name\": \"R\", \"language\": \"R\", "
	           "\"metadata\": {\"kbox\": {\"ro_bind\": \"/etc/motd\"}}}",
	           buf, sizeof buf) == NULL);
	CHECK_STR_EQ(err.msg, "kernelspec r: metadata.kbox.ro_bind is not a list of at most 32 "
	                      "paths");
	CHECK(find("{\"argv\": [\"R\"], \"display_name\": \"R\", \"language\": \"R\", "
	           "\"metadata\": {\"kbox\": {\"ro_bind\": [1]}}}",
	           buf, sizeof buf) == NULL);
	CHECK_STR_EQ(err.msg, "kernelspec r: metadata.kbox.ro_bind[0] is not a string");
}

int main(void)
{
	if (!(root = test_mkdtemp("robind"))) {
		printf("Bail out! cannot make a directory under /tmp\n");
		return 1;
	}
	chmod(root, 0755);
	make("/usr/bin/R", 0755);
	make("/usr/lib/R/etc/", 0755);
	make("/etc/R/Renviron", 0644);
	make("/etc/R/Rprofile.site", 0644);
	make("/etc/R/closed", 0600);
	make("/etc/hidden/f", 0644);
	chmod(in_root("/etc/hidden"), 0700); /* readable, but not reachable by all */
	make("/etc/Rconf/a", 0644);
	make("/etc/shadow", 0644); /* readable here: refused by its name */
	make("/etc/motd", 0644);
	make("/etc/tls/private/", 0755);
	make("/home/bob/", 0755);
	link_to("/usr/bin/other", "/etc/motd"); /* another program's, in a shared bin */
	make("/opt/r/bin/R", 0755);
	link_to("/opt/r/bin/conf", "/etc/motd"); /* R's own bin */
	link_to("/usr/lib/R/etc/Renviron", "/etc/R/Renviron");
	link_to("/usr/lib/R/etc/Rprofile.site", "../../../../etc/R/Rprofile.site");
	link_to("/usr/lib/R/etc/conf", "/etc/Rconf");
	link_to("/usr/lib/R/etc/inner", "/etc/Rconf/a");
	link_to("/usr/lib/R/etc/shadow", "/etc/shadow");
	link_to("/usr/lib/R/etc/home", "/home/bob");
	link_to("/usr/lib/R/etc/closed", "/etc/R/closed");
	link_to("/usr/lib/R/etc/loop", "/etc/loop");
	link_to("/etc/link", "/etc/Rconf");
	link_to("/etc/climb", "../../../../../../etc/Rconf/a");
	link_to("/etc/sh-link", "shadow");
	link_to("/etc/tohome", "/home/bob");
	link_to("/etc/loop", "/etc/loop");
	if (mkfifo(in_root("/etc/fifo"), 0644) < 0)
		printf("# mkfifo: %s\n", strerror(errno));

	RUN(a_readable_directory_below_etc_is_bound_at_its_path);
	RUN(a_file_not_every_user_may_reach_is_refused);
	RUN(where_the_root_itself_is_is_not_judged);
	RUN(a_path_is_normalized);
	RUN(an_absolute_link_is_followed_inside_the_root);
	RUN(a_relative_link_cannot_climb_out_of_the_root);
	RUN(what_the_sandbox_shows_already_is_left_alone);
	RUN(a_dotdot_path_is_refused);
	RUN(only_etc_opt_and_srv_are_bound);
	RUN(the_sandbox_etc_files_are_never_replaced);
	RUN(a_secret_looking_name_is_refused_before_it_is_looked_up);
	RUN(a_link_to_a_secret_looking_name_is_refused);
	RUN(a_link_out_of_the_allowed_places_is_refused);
	RUN(a_file_not_every_user_may_read_is_refused);
	RUN(a_directory_holding_one_is_refused);
	RUN(a_directory_holding_a_secret_name_is_refused);
	RUN(a_fifo_is_refused);
	RUN(a_link_loop_is_refused);
	RUN(kbox_own_directories_are_refused_and_what_holds_them);
	RUN(the_install_tree_links_and_the_kernelspec_paths_are_found);
	RUN(the_links_of_a_bin_directory_of_its_own_are_found_not_of_usr_bin);
	RUN(a_refused_kernelspec_path_fails_the_find);
	RUN(a_kernelspec_ro_bind_that_is_not_a_list_of_strings_fails);
	test_rm_rf(root);
	free(root);
	return tap_done();
}
