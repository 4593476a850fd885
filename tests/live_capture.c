/* tests/live_capture.c — the capture layer against a real ipykernel: what
 * an agent reads after each of the cells it typically runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kbox.h>
#include "tap.h"
#include "live.h"

static kbox_kspec_t *g_spec;
static kbox_kernel_t *g_kernel;
static kbox_client_t *g_client;
static char *g_dir;

/* Run CODE through a fresh capture writing into a fresh outputs dir (its
 * path in *OUTDIR, caller frees).  The result, or NULL. */
static kbox_result_t *capture_run(const char *code, size_t max_bytes, size_t max_lines,
                                  char **outdir)
{
	kbox_capture_opts_t co = {0};
	kbox_exec_opts_t eo = {0};
	kbox_capture_t *cap;
	kbox_exec_t *x;
	kbox_result_t *r;

	*outdir = live_mkdtemp("out");
	co.outputs_dir = *outdir;
	co.max_bytes = max_bytes;
	co.max_lines = max_lines;
	cap = kbox_capture_new(&co, NULL);
	if (!cap)
		return NULL;
	eo.code = code;
	eo.timeout_ms = LIVE_EXEC_MS;
	eo.interrupt_on_timeout = true;
	eo.on_msg = kbox_capture_on_msg;
	eo.cb_arg = cap;
	x = kbox_client_execute(g_client, &eo, NULL);
	if (!x) {
		kbox_capture_destroy(&cap);
		return NULL;
	}
	r = kbox_capture_finish(&cap, x);
	kbox_exec_destroy(&x);
	return r;
}

static void done(kbox_result_t **r, char **outdir)
{
	kbox_result_destroy(r);
	live_rm_rf(*outdir);
	free(*outdir);
	*outdir = NULL;
}

/* The PNG at PATH is W x H pixels. */
static int png_is(const char *path, int w, int h)
{
	unsigned char buf[32];
	int fd = path ? open(path, O_RDONLY) : -1, ww, hh;
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
	if (fd >= 0)
		close(fd);
	return n >= 24 && kbox_image_size(buf, (size_t)n, &ww, &hh) == 0 && ww == w && hh == h;
}

#define EXACT_FIGS "%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n"

TEST(dataframe_repr_is_text_plain_with_html_kept_in_bundle)
{
	char *out;
	kbox_result_t *r = capture_run("import pandas as pd\n"
	                               "pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
	                               0, 0, &out);
	json_t *v;
	REQUIRE(r != NULL);
	CHECK_INT_EQ(kbox_result_status(r), KBOX_EXEC_OK);
	REQUIRE(kbox_result_value_text(r) != NULL);
	CHECK_STR_EQ(kbox_result_value_text(r)->text, "   a  b\n0  1  x\n1  2  y");
	v = kbox_result_value(r);
	CHECK(json_is_string(json_object_get(v, "text/html")));
	CHECK_CONTAINS(json_string_value(json_object_get(v, "text/html")), "<table");
	done(&r, &out);
}

TEST(df_plot_show_writes_one_png_of_exact_size)
{
	char *out;
	kbox_result_t *r = capture_run(EXACT_FIGS "import pandas as pd, matplotlib.pyplot as plt\n"
	                                          "pd.Series([1, 3, 2]).plot(figsize=(4, 3))\n"
	                                          "plt.gcf().set_dpi(50)\nplt.show()",
	                               0, 0, &out);
	const kbox_image_t *img;
	char want[PATH_MAX];
	REQUIRE(r != NULL);
	CHECK_INT_EQ(kbox_result_status(r), KBOX_EXEC_OK);
	REQUIRE(kbox_result_image_count(r) == 1);
	img = kbox_result_image(r, 0);
	CHECK_STR_EQ(img->mime, "image/png");
	snprintf(want, sizeof want, "%s/%d-1.png", out, kbox_result_count(r));
	CHECK_STR_EQ(img->path, want);
	CHECK_INT_EQ(img->width, 200);
	CHECK_INT_EQ(img->height, 150);
	CHECK(png_is(img->path, 200, 150));
	CHECK_INT_EQ(kbox_result_display_count(r), 1);
	done(&r, &out);
}

TEST(two_figures_in_one_cell_write_two_files)
{
	char *out;
	kbox_result_t *r = capture_run(EXACT_FIGS
	                               "import matplotlib.pyplot as plt\n"
	                               "f1 = plt.figure(figsize=(2, 2), dpi=50); plt.plot([1, 2])\n"
	                               "f2 = plt.figure(figsize=(3, 2), dpi=50); plt.plot([2, 1])\n"
	                               "plt.show()",
	                               0, 0, &out);
	REQUIRE(r != NULL);
	REQUIRE(kbox_result_image_count(r) == 2);
	CHECK(png_is(kbox_result_image(r, 0)->path, 100, 100));
	CHECK(png_is(kbox_result_image(r, 1)->path, 150, 100));
	CHECK_CONTAINS(kbox_result_image(r, 0)->path, "-1.png");
	CHECK_CONTAINS(kbox_result_image(r, 1)->path, "-2.png");
	done(&r, &out);
}

TEST(progress_loop_with_carriage_returns_collapses_to_last_state)
{
	char *out;
	kbox_result_t *r = capture_run("import sys, time\n"
	                               "for i in range(101):\n"
	                               "    print(f'\\rprogress {i:3d}%', end='', flush=True)\n"
	                               "    time.sleep(0.002)\n"
	                               "print()\nprint('done')",
	                               0, 0, &out);
	REQUIRE(r != NULL);
	CHECK_STR_EQ(kbox_result_stream(r, KBOX_TEXT_STDOUT)->text, "progress 100%\ndone\n");
	done(&r, &out);
}

TEST(clear_output_wait_loop_leaves_only_the_last_output)
{
	char *out;
	kbox_result_t *r = capture_run("from IPython.display import clear_output\n"
	                               "import time\n"
	                               "for i in range(5):\n"
	                               "    clear_output(wait=True)\n"
	                               "    print('step', i)\n"
	                               "    time.sleep(0.01)",
	                               0, 0, &out);
	REQUIRE(r != NULL);
	CHECK_STR_EQ(kbox_result_stream(r, KBOX_TEXT_STDOUT)->text, "step 4\n");
	done(&r, &out);
}

TEST(display_update_replaces_the_display_with_its_id)
{
	char *out;
	kbox_result_t *r = capture_run("from IPython.display import display\n"
	                               "h = display('first', display_id=True)\n"
	                               "h.update('second')",
	                               0, 0, &out);
	REQUIRE(r != NULL);
	REQUIRE(kbox_result_display_count(r) == 1);
	CHECK_STR_EQ(json_string_value(json_object_get(kbox_result_display(r, 0), "text/plain")),
	             "'second'");
	CHECK(kbox_result_display_id(r, 0) != NULL);
	done(&r, &out);
}

TEST(error_inside_function_has_stripped_traceback_naming_it)
{
	char *out;
	kbox_result_t *r = capture_run("def divide(a, b):\n    return a / b\n\ndivide(1, 0)", 0, 0,
	                               &out);
	const kbox_text_t *tb;
	REQUIRE(r != NULL);
	CHECK_INT_EQ(kbox_result_status(r), KBOX_EXEC_ERROR);
	CHECK_STR_EQ(kbox_result_ename(r, NULL), "ZeroDivisionError");
	CHECK_STR_EQ(kbox_result_evalue(r, NULL), "division by zero");
	tb = kbox_result_traceback(r);
	REQUIRE(tb != NULL);
	CHECK(strchr(tb->text, '\033') == NULL);
	CHECK_CONTAINS(tb->text, "divide");
	CHECK_CONTAINS(tb->text, "ZeroDivisionError: division by zero");
	CHECK(json_array_size(kbox_result_traceback_raw(r)) > 0);
	/* the raw traceback is kept as sent, escapes and all */
	{
		size_t i;
		json_t *line;
		int esc = 0;
		json_array_foreach(kbox_result_traceback_raw(r), i, line)
		        esc |= strchr(json_string_value(line), '\033') != NULL;
		CHECK(esc);
	}
	done(&r, &out);
}

TEST(long_output_keeps_head_and_tail_and_spills_all)
{
	char *out;
	kbox_result_t *r = capture_run("for i in range(5000): print(i)", 1000, 20, &out);
	const kbox_text_t *t;
	char *all = NULL, *want;
	size_t len = 0, n = 0;
	FILE *f;
	REQUIRE(r != NULL);
	t = kbox_result_stream(r, KBOX_TEXT_STDOUT);
	CHECK(t->truncated);
	CHECK_INT_EQ(t->total_lines, 5000);
	CHECK(strncmp(t->text, "0\n1\n2\n", 6) == 0);
	CHECK_CONTAINS(t->text, "\n4999\n");
	CHECK_CONTAINS(t->text, "lines left out; the complete text is in ");
	REQUIRE(t->spill_path != NULL);
	f = fopen(t->spill_path, "r");
	REQUIRE(f != NULL);
	CHECK(getdelim(&all, &len, '\0', f) > 0);
	fclose(f);
	want = malloc(5000 * 6);
	for (int i = 0; i < 5000; i++)
		n += (size_t)sprintf(want + n, "%d\n", i);
	CHECK_INT_EQ(t->total_bytes, n);
	CHECK_STR_EQ(all, want);
	free(all);
	free(want);
	done(&r, &out);
}

TEST(stdout_and_stderr_are_kept_apart_in_order)
{
	char *out;
	kbox_result_t *r = capture_run("import sys\nprint('a')\nprint('b', file=sys.stderr)\n"
	                               "print('c')\nsys.stderr.write('d\\n')",
	                               0, 0, &out);
	REQUIRE(r != NULL);
	CHECK_STR_EQ(kbox_result_stream(r, KBOX_TEXT_STDOUT)->text, "a\nc\n");
	CHECK_STR_EQ(kbox_result_stream(r, KBOX_TEXT_STDERR)->text, "b\nd\n");
	done(&r, &out);
}

TEST(text_rendering_of_a_plot_names_file_and_size)
{
	char *out, *text, want[PATH_MAX + 64];
	kbox_result_t *r = capture_run(
	        EXACT_FIGS "import matplotlib.pyplot as plt\n"
	                   "plt.figure(figsize=(2, 1), dpi=100); plt.plot([1]); plt.show()",
	        0, 0, &out);
	REQUIRE(r != NULL);
	text = kbox_render_text(r);
	snprintf(want, sizeof want,
	         "[image saved: %s/%d-1.png (200\xc3\x97"
	         "100 px)]\n",
	         out, kbox_result_count(r));
	CHECK_STR_EQ(text, want);
	free(text);
	done(&r, &out);
}

int main(void)
{
	kbox_error_t err = {0};

	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	g_spec = live_python3();
	if (!g_spec) {
		printf("1..0 # SKIP no Debian python3 kernelspec with ipykernel\n");
		return 0;
	}
	g_dir = live_mkdtemp("capture");
	if (g_dir)
		g_kernel = live_start(g_spec, g_dir, &g_client, &err);
	if (!g_kernel) {
		printf("Bail out! kernel did not start: %s\n", err.msg);
		return 1;
	}
	RUN(dataframe_repr_is_text_plain_with_html_kept_in_bundle);
	RUN(df_plot_show_writes_one_png_of_exact_size);
	RUN(two_figures_in_one_cell_write_two_files);
	RUN(progress_loop_with_carriage_returns_collapses_to_last_state);
	RUN(clear_output_wait_loop_leaves_only_the_last_output);
	RUN(display_update_replaces_the_display_with_its_id);
	RUN(error_inside_function_has_stripped_traceback_naming_it);
	RUN(long_output_keeps_head_and_tail_and_spills_all);
	RUN(stdout_and_stderr_are_kept_apart_in_order);
	RUN(text_rendering_of_a_plot_names_file_and_size);

	kbox_kernel_stop(g_kernel, g_client, NULL);
	kbox_client_destroy(&g_client);
	kbox_kernel_destroy(&g_kernel);
	kbox_kspec_destroy(&g_spec);
	live_rm_rf(g_dir);
	free(g_dir);
	return tap_done();
}
