/* tests/tmpdir.h — private temporary directories for tests. */
#ifndef KBOX_TESTS_TMPDIR_H
#define KBOX_TESTS_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A new private (0700) directory under /tmp.  Caller frees the string and
 * removes the directory with test_rm_rf.  NULL on failure. */
static inline char *test_mkdtemp(const char *tag)
{
	char buf[256];
	char *dir;

	if (snprintf(buf, sizeof buf, "/tmp/kbox-%s-XXXXXX", tag) >= (int)sizeof buf)
		return NULL;
	if (!mkdtemp(buf))
		return NULL;
	dir = strdup(buf);
	if (!dir)
		rmdir(buf);
	return dir;
}

/* Remove DIR and everything under it (no symlinks followed).  Accepts NULL. */
static inline void test_rm_rf(const char *dir)
{
	DIR *d;
	struct dirent *e;
	char path[4096];
	struct stat st;

	if (!dir)
		return;
	d = opendir(dir);
	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
			    (int)sizeof path)
				continue;
			if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
				test_rm_rf(path);
			else
				unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

#endif
